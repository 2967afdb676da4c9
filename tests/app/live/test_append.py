"""``"display": "append"`` on ``WebSocket /v1/live`` against the real server and model
(API.md "Append-only text and voices"): ``commit`` frames only ever extend, a segment's
final caption starts with everything committed (its last commit is the final's text),
nothing is committed after a final, several languages at once, a room's viewers get the
commits too, and bad values of ``display`` are refused."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import websockets

SENTENCES = [
    "The committee will meet again next week to discuss the new budget for the schools.",
    "Most of the members agreed that the plan needs more time and more money.",
]


def _ws(server, path: str) -> str:  # noqa: ANN001
    return server.url.replace("http://", "ws://") + path


async def _until(ws, frames: list[dict], done) -> None:  # noqa: ANN001
    async with asyncio.timeout(300):
        while not done(frames):
            frames.append(json.loads(await ws.recv()))


def _captions(frames: list[dict], lang: str) -> int:
    return sum(1 for f in frames if f["type"] == "caption" and f["lang"] == lang)


async def _speak(ws, langs: list[str]) -> list[dict]:  # noqa: ANN001
    """Each sentence two words at a time, one update at a time (no coalescing: every
    update gets its caption in every language before the next), then its final."""
    frames: list[dict] = []
    for seg, sentence in enumerate(SENTENCES):
        words = sentence.split()
        for n in range(2, len(words) + 2, 2):
            final = n >= len(words)
            text = sentence if final else " ".join(words[:n])
            await ws.send(json.dumps({"type": "final" if final else "partial",
                                      "segment": seg, "text": text}))
            want = {lang: _captions(frames, lang) + 1 for lang in langs}
            await _until(ws, frames, lambda fs, want=want: all(
                _captions(fs, lang) >= count for lang, count in want.items()))
            if final:
                break
    await ws.send(json.dumps({"type": "stop"}))
    await _until(ws, frames, lambda fs: fs[-1]["type"] == "done")
    return frames


def _check_append_only(frames: list[dict], lang: str, segment: int) -> list[dict]:
    """The commit frames of one (segment, language), checked; returns them."""
    mine = [f for f in frames if f.get("lang") == lang and f.get("segment") == segment
            and f["type"] in ("commit", "caption")]
    final_at = next(i for i, f in enumerate(mine) if f["type"] == "caption" and f["final"])
    assert all(f["type"] != "commit" for f in mine[final_at:]), "a commit after the final"
    commits = [f for f in mine if f["type"] == "commit"]
    assert commits, "the final's commit is missing"
    text = ""
    for c in commits:
        assert c["text"] == text + c["delta"]  # only ever extends, never revised
        text = c["text"]
    final = mine[final_at]
    assert final["text"] == commits[-1]["text"]
    for c in commits:
        assert final["text"].startswith(c["text"])
    return commits


def test_append_commits_only_extend_and_the_final_starts_with_them(live_server) -> None:
    langs = ["de", "ja"]

    async def main() -> tuple[dict, list[dict]]:
        async with websockets.connect(_ws(live_server, "/v1/live"), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": langs,
                                      "display": "append"}))
            ready = json.loads(await ws.recv())
            return ready, await _speak(ws, langs)

    ready, frames = asyncio.run(main())
    assert ready["type"] == "ready" and ready["display"] == "append"
    assert [f for f in frames if f["type"] == "error"] == []
    before_final = 0
    for lang in langs:
        for seg in range(len(SENTENCES)):
            commits = _check_append_only(frames, lang, seg)
            before_final += len(commits) - 1
    # words were committed while the sentences were still being spoken
    assert before_final > 0


def test_without_append_there_are_no_commit_frames(live_server) -> None:
    async def main() -> list[dict]:
        async with websockets.connect(_ws(live_server, "/v1/live"), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            ready = json.loads(await ws.recv())
            assert "display" not in ready
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Hello."}))
            frames: list[dict] = []
            await ws.send(json.dumps({"type": "stop"}))
            await _until(ws, frames, lambda fs: bool(fs) and fs[-1]["type"] == "done")
            return frames

    frames = asyncio.run(main())
    assert [f["type"] for f in frames] == ["caption", "done"]


def test_a_rooms_viewers_get_the_commits(live_server) -> None:
    room = "a-" + uuid.uuid4().hex[:10]

    async def main() -> tuple[list[dict], list[dict]]:
        seen: list[dict] = []

        async def watch() -> None:
            url = _ws(live_server, f"/v1/live/watch?room={room}&lang=de")
            async with asyncio.timeout(300), websockets.connect(url, max_size=None) as ws:
                try:
                    async for raw in ws:
                        seen.append(json.loads(raw))
                except websockets.ConnectionClosed:
                    pass

        async with websockets.connect(_ws(live_server, "/v1/live"), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room,
                                      "display": "append"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            viewer = asyncio.create_task(watch())
            async with asyncio.timeout(60):
                while not seen:
                    await asyncio.sleep(0.01)
            frames = await _speak(ws, ["de"])
            await asyncio.wait_for(viewer, 60)
        return frames, seen

    frames, seen = asyncio.run(main())
    assert seen[0]["type"] == "joined" and seen[-1]["type"] == "ended"
    for seg in range(len(SENTENCES)):
        spoken = _check_append_only(frames, "de", seg)
        watched = [f for f in seen if f["type"] == "commit" and f["segment"] == seg]
        # a viewer's queue may drop a commit under load; each carries the whole text
        assert watched and watched[-1]["text"] == spoken[-1]["text"]
        assert [c["text"] for c in watched] == [
            c["text"] for c in spoken if c["text"] in {w["text"] for w in watched}]


@pytest.mark.parametrize(("display", "code"), [
    ("flashy", "unknown_mode"),
    ("APPEND", "unknown_mode"),
    (7, "unknown_mode"),
    (None, "unknown_mode"),
    (["append"], "unknown_mode"),
])
def test_a_bad_display_is_refused(live_server, display, code) -> None:  # noqa: ANN001
    async def main() -> dict:
        async with websockets.connect(_ws(live_server, "/v1/live")) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                      "display": display}))
            return json.loads(await ws.recv())

    refused = asyncio.run(main())
    assert (refused["type"], refused["code"], refused["param"]) == ("error", code, "display")
