"""Rooms end to end: a speaker fans out into two languages, viewers watch on
``WebSocket /v1/live/watch`` (API.md, "Events: several languages, rooms, viewers")."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
import websockets

from tests.conftest import LiveServer

SEGMENTS = [
    [("partial", "Good morning"), ("final", "Good morning everyone.")],
    [("partial", "Thank you for"), ("final", "Thank you for coming.")],
    [("final", "Let us begin.")],
]


def _ws(server, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def _room() -> str:
    return "t-" + uuid.uuid4().hex[:10]


async def _watch(url: str, frames: list[dict], limit: float = 300) -> int | None:
    """Collect a viewer's frames until the server closes; returns the close code."""
    async with asyncio.timeout(limit), websockets.connect(url, max_size=None) as ws:
        try:
            async for raw in ws:
                frames.append(json.loads(raw))
        except websockets.ConnectionClosed:
            pass
        return ws.protocol.close_rcvd.code if ws.protocol.close_rcvd else None


async def _joined(frames: list[dict]) -> None:
    while not frames:
        await asyncio.sleep(0.01)


async def _read_until(ws, frames: list[dict], done) -> None:  # noqa: ANN001
    async with asyncio.timeout(300):
        while not done(frames):
            frames.append(json.loads(await ws.recv()))


def _finals(frames: list[dict], lang: str) -> list[dict]:
    return [f for f in frames if f["type"] == "caption" and f["final"] and f["lang"] == lang]


def test_viewers_see_every_final_of_their_language_once_in_order(live_server) -> None:
    room = _room()
    watch = _ws(live_server, f"/v1/live/watch?room={room}&lang=")
    de, ja, late = [], [], []

    async def main() -> tuple[dict, list[dict], int | None, int | None, int | None]:
        viewers = [asyncio.create_task(_watch(watch + "de", de)),
                   asyncio.create_task(_watch(watch + "ja", ja))]
        await asyncio.wait_for(asyncio.gather(_joined(de), _joined(ja)), 60)
        spoken: list[dict] = []
        async with websockets.connect(_ws(live_server, "/v1/live"), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"],
                                      "room": room, "drafters": []}))
            ready = json.loads(await ws.recv())
            for seg, events in enumerate(SEGMENTS[:2]):
                for kind, text in events:
                    await ws.send(json.dumps({"type": kind, "segment": seg, "text": text}))
            await _read_until(ws, spoken, lambda fs: len([
                f for f in fs if f["type"] == "caption" and f["final"]]) == 4)
            late_viewer = asyncio.create_task(_watch(watch + "de", late))
            await asyncio.wait_for(_joined(late), 60)
            for kind, text in SEGMENTS[2]:
                await ws.send(json.dumps({"type": kind, "segment": 2, "text": text}))
            await ws.send(json.dumps({"type": "stop"}))
            await _read_until(ws, spoken, lambda fs: fs[-1]["type"] == "done")
        # the moment 'done' came, the talk's transcript is whole (in --data-dir's SQLite)
        async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as http:
            for lang in ("de", "ja"):
                r = await http.get(f"/v1/rooms/{room}/transcript",
                                   params={"lang": lang, "format": "json"})
                transcripts[lang] = r.json()
        codes = await asyncio.wait_for(asyncio.gather(*viewers, late_viewer), 60)
        return ready, spoken, *codes

    transcripts: dict[str, dict] = {}
    ready, spoken, *codes = asyncio.run(main())
    for lang in ("de", "ja"):
        lines = transcripts[lang]["lines"]
        assert [(x["segment"], x["text"]) for x in lines] == [
            (c["segment"], c["text"]) for c in _finals(spoken, lang)]
    assert ready["type"] == "ready" and ready["room"] == room and "viewer_token" not in ready
    assert [m for m in spoken if m["type"] == "error"] == []
    assert codes == [1000, 1000, 1000]
    for lang, frames in (("de", de), ("ja", ja), ("de", late)):
        assert frames[0]["type"] == "joined" and frames[0]["room"] == room
        assert frames[0]["lang"] == lang and frames[-1] == {"type": "ended"}
        captions = [f for f in frames if f["type"] == "caption"]
        assert {c["lang"] for c in captions} <= {lang}
        segments = [c["segment"] for c in captions]
        assert segments == sorted(segments)
        # the viewer's frames are the speaker's frames of that language
        assert all(c in spoken for c in captions)
        seen = frames[0]["recent"] + _finals(frames, lang)
        assert seen == _finals(spoken, lang)
        assert [c["segment"] for c in seen] == [0, 1, 2]
    assert de[0]["recent"] == ja[0]["recent"] == []
    assert [c["segment"] for c in late[0]["recent"]] == [0, 1]  # the late viewer caught up


def _set_limits(server, monkeypatch, **limits) -> None:
    from app.live.limits import LiveLimits

    monkeypatch.setattr(server.app.state.livetrans, "live_limits", LiveLimits(**limits),
                        raising=False)


async def _refusal(url: str) -> tuple[dict, int]:
    async with websockets.connect(url) as ws:
        error = json.loads(await ws.recv())
        with pytest.raises(websockets.ConnectionClosed):
            await ws.recv()
        return error, ws.protocol.close_rcvd.code


def _viewers_gone(server) -> bool:
    """Wait (a bounded while) until the server has let go of every viewer: a viewer's
    handler ends just after its client sees the close."""
    import time

    registry = getattr(server.app.state.livetrans, "rooms", None)
    for _ in range(1000):
        if registry is None or registry.viewers == 0:
            return True
        time.sleep(0.01)
    return False


def test_viewers_are_bounded_per_room_and_in_total(live_server, monkeypatch) -> None:
    assert _viewers_gone(live_server)  # earlier tests' viewers do not count
    _set_limits(live_server, monkeypatch, max_viewers=2, max_viewers_per_room=1)
    room, other, third = _room(), _room(), _room()
    url = _ws(live_server, "/v1/live/watch?lang=de&room=")

    async def main() -> tuple[dict, int, dict, int]:
        async with websockets.connect(url + room) as first:
            assert json.loads(await first.recv())["type"] == "joined"
            same_room = await _refusal(url + room)
            async with websockets.connect(url + other) as second:
                assert json.loads(await second.recv())["type"] == "joined"
                total = await _refusal(url + third)
        return *same_room, *total

    room_err, room_code, total_err, total_code = asyncio.run(main())
    assert (room_err["code"], room_code) == ("too_many_viewers", 1013)
    assert "room" in room_err["message"]
    assert (total_err["code"], total_code) == ("too_many_viewers", 1013)
    assert _viewers_gone(live_server)
    metrics = httpx.get(live_server.url + "/metrics").text
    assert "livetrans_live_viewers 0.0" in metrics
    assert "livetrans_viewer_frames_dropped_total" in metrics


@pytest.mark.parametrize(("query", "code"), [
    ("room=a%20b&lang=de", "invalid_room"), ("lang=de", "invalid_room"),
    ("room=ok&lang=xx", "unsupported_language"), ("room=ok", "unsupported_language"),
])
def test_a_bad_room_or_language_is_refused_with_1008(live_server, query, code) -> None:
    err, close = asyncio.run(_refusal(_ws(live_server, "/v1/live/watch?" + query)))
    assert (err["type"], err["code"], close) == ("error", code, 1008)


def test_a_second_speaker_for_the_room_gets_an_error(live_server) -> None:
    room = _room()

    async def main() -> tuple[dict, dict, dict]:
        url = _ws(live_server, "/v1/live")
        async with websockets.connect(url) as first, websockets.connect(url) as second:
            await first.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
            ready = json.loads(await first.recv())
            await second.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room}))
            taken = json.loads(await second.recv())
            await second.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room + "-2"}))
            other = json.loads(await second.recv())
            return ready, taken, other

    ready, taken, other = asyncio.run(main())
    assert ready["type"] == "ready" and ready["room"] == room
    assert (taken["type"], taken["code"], taken["param"]) == ("error", "room_taken", "room")
    assert other["type"] == "ready"  # the connection lives on; another room is free


def test_a_speaker_leaving_without_stop_ends_the_talk(live_server) -> None:
    room = _room()
    frames: list[dict] = []

    async def main() -> int | None:
        viewer = asyncio.create_task(_watch(
            _ws(live_server, f"/v1/live/watch?room={room}&lang=de"), frames))
        await asyncio.wait_for(_joined(frames), 60)
        async with websockets.connect(_ws(live_server, "/v1/live")) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
            await ws.recv()
        return await asyncio.wait_for(viewer, 60)

    assert asyncio.run(main()) == 1000
    assert [f["type"] for f in frames] == ["joined", "ended"]


@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=["speaker-key"]) as server:
        yield server


def test_with_api_keys_viewers_need_the_rooms_viewer_token(keyed_server) -> None:
    room = _room()
    watch = _ws(keyed_server, f"/v1/live/watch?room={room}&lang=de")

    async def main() -> tuple[dict, tuple, tuple, tuple, list[dict]]:
        frames: list[dict] = []
        async with websockets.connect(_ws(keyed_server, "/v1/live"), additional_headers={
                "Authorization": "Bearer speaker-key"}) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room,
                                      "drafters": []}))
            ready = json.loads(await ws.recv())
            token = ready.get("viewer_token", "")
            no_token = await _refusal(watch)
            key_as_token = await _refusal(watch + "&token=speaker-key")
            other_room = await _refusal(
                _ws(keyed_server, f"/v1/live/watch?room={room}x&lang=de&token={token}"))
            viewer = asyncio.create_task(_watch(f"{watch}&token={token}", frames))
            await asyncio.wait_for(_joined(frames), 60)
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Welcome."}))
            await ws.send(json.dumps({"type": "stop"}))
            await _read_until(ws, [], lambda fs: fs and fs[-1]["type"] == "done")
        await asyncio.wait_for(viewer, 60)
        return ready, no_token, key_as_token, other_room, frames

    ready, no_token, key_as_token, other_room, frames = asyncio.run(main())
    assert ready["room"] == room and len(ready["viewer_token"]) == 32
    assert "speaker-key" not in ready["viewer_token"]
    for err, code in (no_token, key_as_token, other_room):
        assert (err["code"], code) == ("invalid_token", 1008)
    assert [f["type"] for f in frames] == ["joined", "caption", "ended"]
    assert frames[1]["final"] and frames[1]["lang"] == "de"


def test_a_viewer_that_reads_nothing_holds_up_nobody_and_keeps_its_finals(
        live_server, monkeypatch) -> None:
    """A viewer that reads nothing while the talk goes on (its server queue bounded to 2
    frames): the speaker and a reading viewer get everything without waiting for it, and
    when it reads at last it finds every final (partials may be gone; the drop policy
    itself is tested in ``test_rooms``)."""
    _set_limits(live_server, monkeypatch, viewer_queue_frames=2)
    room = _room()
    watch = _ws(live_server, f"/v1/live/watch?room={room}&lang=de")
    reading: list[dict] = []
    words = "one two three four five six seven eight".split()

    async def main() -> tuple[list[dict], list[dict]]:
        reader = asyncio.create_task(_watch(watch, reading))
        slow = await websockets.connect(watch, max_size=None, max_queue=1)
        # the client library's buffer holds one frame, TCP some more: the server's queue for
        # this viewer fills while the talk goes on
        await asyncio.wait_for(_joined(reading), 60)
        spoken: list[dict] = []
        async with websockets.connect(_ws(live_server, "/v1/live")) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room,
                                      "drafters": []}))
            await ws.recv()
            for seg in range(2):
                for i in range(1, len(words) + 1):
                    await ws.send(json.dumps({"type": "partial", "segment": seg,
                                              "text": " ".join(words[:i])}))
                    await _read_until(ws, spoken, lambda fs, n=len(spoken): len(fs) > n)
                await ws.send(json.dumps({"type": "final", "segment": seg,
                                          "text": " ".join(words) + "."}))
            await ws.send(json.dumps({"type": "stop"}))
            await _read_until(ws, spoken, lambda fs: fs[-1]["type"] == "done")
        await asyncio.wait_for(reader, 60)
        slow_frames = []
        async with asyncio.timeout(60):
            try:
                async for raw in slow:
                    slow_frames.append(json.loads(raw))
            except websockets.ConnectionClosed:
                pass
        return spoken, slow_frames

    spoken, slow_frames = asyncio.run(main())
    speaker_captions = [m for m in spoken if m["type"] == "caption"]
    assert [c for c in reading if c["type"] == "caption"] == speaker_captions
    assert _finals(slow_frames, "de") == _finals(spoken, "de")
    assert slow_frames[-1] == {"type": "ended"}


@pytest.mark.parametrize("token", ["caf%C3%A9", "%F0%9F%99%82" * 8, "%00", "%FF%FE", "x" * 4000])
def test_any_viewer_token_text_is_refused_cleanly(keyed_server, token) -> None:
    """A non-ASCII token was an HTTP 500 with a traceback (compare_digest on str)."""
    url = _ws(keyed_server, f"/v1/live/watch?room={_room()}&lang=de&token={token}")
    err, close = asyncio.run(_refusal(url))
    assert (err["code"], close) == ("invalid_token", 1008)


def test_a_viewer_of_a_language_the_talk_lacks_is_told_so(live_server) -> None:
    room = _room()

    async def main() -> tuple[dict, int, list[dict]]:
        waiting: list[dict] = []
        waiter = asyncio.create_task(_watch(
            _ws(live_server, f"/v1/live/watch?room={room}&lang=fr"), waiting))
        await asyncio.wait_for(_joined(waiting), 60)
        async with websockets.connect(_ws(live_server, "/v1/live")) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"],
                                      "room": room, "drafters": []}))
            assert json.loads(await ws.recv())["type"] == "ready"
            late = await _refusal(_ws(live_server, f"/v1/live/watch?room={room}&lang=zh"))
            await asyncio.wait_for(waiter, 60)
        return *late, waiting

    err, close, waiting = asyncio.run(main())
    assert (err["code"], close) == ("lang_not_in_room", 1008) and "de, ja" in err["message"]
    assert [f["type"] for f in waiting] == ["joined", "error", "ended"]
    assert waiting[1]["code"] == "lang_not_in_room"
