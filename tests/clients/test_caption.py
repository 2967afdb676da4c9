"""``livetrans caption`` against the real server: replay, stdin, statistics."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

from clients.caption import RunStats, main


def test_replay_prints_stream_statistics(live_server, data_dir, capsys) -> None:
    path = data_dir / "asr_partials" / "acl6060_dev_en.jsonl"
    server = live_server.url  # the HTTP address, as users copy it
    assert main(["--server", server, "--file", str(path), "--limit", "2", "--fast", "--quiet",
                 "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 2 and stats["errors"] == 0
    assert stats["captions"] >= 2 and stats["final_to_caption_ms_p50"] > 0
    assert stats["ne_display"] is not None
    # accepted/proposed draft tokens by source ("ngram 29/49, ssbd 40/52"), or "0" when every
    # partial was superseded before it was translated (how often depends on the machine)
    assert re.fullmatch(r"0|[a-z_]+ \d+/\d+(, [a-z_]+ \d+/\d+)*", stats["drafts_accepted"])


def test_partials_from_stdin(live_server, monkeypatch, capsys) -> None:
    lines = [{"type": "partial", "text": "Thank you"},
             {"type": "final", "text": "Thank you all."},
             {"type": "final", "text": "Next slide please."}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
    server = live_server.url  # the HTTP address, as users copy it
    assert main(["--server", server, "--stdin", "--quiet", "--json",
                 "--target-lang", "ja"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 2


def test_draft_counts_by_source_add_up_over_captions() -> None:
    stats = RunStats()
    stats.count_drafts({"drafts": {"proposed": {"ssbd": 5, "ngram": 2},
                                   "accepted": {"ssbd": 4, "ngram": 0}}})
    stats.count_drafts({"drafts": {"proposed": {"ssbd": 3}, "accepted": {"ssbd": 3}}})
    stats.count_drafts({"draft_tokens": 1})  # a server without the field: nothing counted
    assert stats.summary("word")["drafts_accepted"] == "ngram 0/2, ssbd 7/8"
    assert RunStats().summary("word")["drafts_accepted"] == "0"


def test_the_tracked_sample_replays_without_any_data_beside_the_repo(live_server, capsys,
                                                                     monkeypatch) -> None:
    """The README's first caption command: the sample in eval/samples, the server from
    ``LIVETRANS_SERVER``."""
    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    monkeypatch.setenv("LIVETRANS_SERVER", live_server.url)
    assert main(["--file", str(sample), "--fast", "--quiet", "--json",
                 "--target-lang", "de"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 3 and stats["errors"] == 0


def test_summary_figures_by_hand() -> None:
    """NE of the displays (app.prefix) and the final-to-caption percentiles, no server."""
    stats = RunStats()
    one = stats.seg(0)
    one.displays = ["a b", "a c d", "a c d e"]  # erases 1 of 4 final words
    one.final_sent_at, one.final_caption_at = 1.0, 1.1
    two = stats.seg(1)
    two.displays = ["天气", "天空好"]  # erases 1 of 3 final characters
    two.final_sent_at, two.final_caption_at = 2.0, 2.3
    words = stats.summary("word")
    assert words["final_to_caption_ms_p50"] == 200.0
    assert words["final_to_caption_ms_p95"] == 290.0
    assert words["ne_display"] == round((1 + 1) / (4 + 1), 3)  # "天空好" is one word
    assert stats.summary("char")["ne_display"] == round((1 + 1) / (4 + 3), 3)
    assert RunStats().summary("word")["final_to_caption_ms_p50"] is None


def test_room_publishes_to_viewers_and_prints_their_link(live_server, capsys) -> None:
    import asyncio

    import websockets

    from clients.urls import live_url

    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    watch = live_url(live_server.url).replace("/v1/live", "/v1/live/watch")

    async def viewer_and_speaker() -> list[dict]:
        async with websockets.connect(f"{watch}?room=caption-cli&lang=de") as viewer:
            frames = [json.loads(await viewer.recv())]  # joined
            speaker = asyncio.create_task(asyncio.to_thread(main, [
                "--server", live_server.url, "--file", str(sample), "--limit", "1",
                "--fast", "--quiet", "--json", "--room", "caption-cli"]))
            while frames[-1]["type"] != "ended":
                frames.append(json.loads(await asyncio.wait_for(viewer.recv(), 300)))
            assert await speaker == 0
            return frames

    frames = asyncio.run(viewer_and_speaker())
    assert frames[0]["type"] == "joined"
    finals = [f for f in frames if f["type"] == "caption" and f.get("final")]
    assert len(finals) == 1 and finals[0]["lang"] == "de" and finals[0]["text"]
    captured = capsys.readouterr()
    assert "/watch?room=caption-cli&lang=de" in captured.err  # --json: stdout is JSON only
    assert json.loads(captured.out)["finals"] == 1


def test_a_room_in_two_languages_with_keys_feeds_each_languages_viewers(capsys) -> None:
    """What a room needs (API.md "Events"): several caption languages, and on a server with
    API keys the speaker's key and the viewer token that the printed links carry."""
    import asyncio
    from urllib.parse import parse_qs, urlsplit

    import websockets

    from clients.urls import live_url
    from tests.conftest import LiveServer

    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    with LiveServer(api_keys=["speaker-key"], parallel=2) as server:
        watch = live_url(server.url).replace("/v1/live", "/v1/live/watch")
        tokens: list[str] = []

        async def viewer(lang: str) -> list[dict]:
            # a token admits to one talk: it exists once the speaker has started
            while (room := server.state.rooms.rooms.get("two-langs")) is None \
                    or room.talk_id is None:
                await asyncio.sleep(0.01)
            token = server.state.rooms.token("two-langs", room.talk_id)
            tokens.append(token)
            url = f"{watch}?room=two-langs&lang={lang}&token={token}"
            async with websockets.connect(url) as ws:
                frames = [json.loads(await ws.recv())]  # joined
                while frames[-1]["type"] != "ended":
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 300)))
                return frames

        async def talk() -> tuple[int, list[list[dict]]]:
            viewers = [asyncio.create_task(viewer(lang)) for lang in ("de", "ja")]
            code = await asyncio.to_thread(main, [
                "--server", server.url, "--api-key", "speaker-key", "--file", str(sample),
                "--limit", "1", "--quiet", "--json", "--target-lang", "de,ja",
                "--room", "two-langs"])
            return code, list(await asyncio.gather(*viewers))

        code, seen = asyncio.run(talk())
    assert code == 0
    token = tokens[0]
    for lang, frames in zip(("de", "ja"), seen, strict=True):
        assert frames[0]["type"] == "joined"
        finals = [f for f in frames[0]["recent"] + frames[1:]
                  if f["type"] == "caption" and f.get("final")]
        assert len(finals) == 1 and finals[0]["lang"] == lang and finals[0]["text"]
    captured = capsys.readouterr()
    out = captured.out  # --json: the statistics only; the links are on stderr
    links = [line.split(" at ", 1)[1] for line in captured.err.splitlines()
             if "viewers watch at" in line]
    queries = [parse_qs(urlsplit(link).query) for link in links]
    assert [q["lang"] for q in queries] == [["de"], ["ja"]]
    assert all(q["token"] == [token] and q["room"] == ["two-langs"] for q in queries)
    stats = json.loads(out)
    assert stats["finals"] == 2 and stats["errors"] == 0  # one final per language
