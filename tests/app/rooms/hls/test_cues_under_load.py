"""HLS cues under load, on a real server (the real model): three speakers talk at once in
three rooms, each sending a final every 0.3 s (on a 2-core machine each German final then
comes with its segment's first caption, and in bursts: the case of a sentence flashed for
0.5 s), while a player polls one room's live playlist. Every published segment, live and
after the talk, holds cues that last at least the floor, as long as their text needs
unless the next cue starts, and never overlap; a cue repeated in several segments has the
same times in each; every final is a cue.

Waits are bounds against hanging, never latency assertions.
"""

from __future__ import annotations

import html
import json
import threading
import time
from urllib.parse import urljoin

import httpx
import m3u8
import pytest
import webvtt

from app.rooms.transcripts.formats import MIN_CUE_MS, reading_ms
from tests.conftest import LiveServer

ROOMS = ["load-a", "load-b", "load-c"]
SENTENCES = ["Good morning.", "Welcome to the second day of the conference.", "Yes.",
             "Our first speaker works on live translation for small events.",
             "Thank you.", "Please switch off your phones now.", "OK.",
             "Questions come at the end of each talk, in the last ten minutes."]
PAUSE_S = 0.3
LIMIT_S = 300  # a bound against hanging

Cue = tuple[str, int, int, str]  # identifier, start ms, end ms, text


@pytest.fixture(scope="module")
def server():
    with LiveServer(hls_segment_s=1, hls_window_s=4, max_source_chars=2000,
                    queue_size=64, max_live_sessions=16) as server:
        yield server


def _talk(server: LiveServer, room: str, finals: dict[str, list[str]]) -> None:
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/v1/live"
    got: list[str] = []
    with connect(url, open_timeout=60, max_size=None) as ws:
        ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready", ready
        for segment, text in enumerate(SENTENCES):
            ws.send(json.dumps({"type": "partial", "segment": segment,
                                "text": text.split()[0]}))
            ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))
            time.sleep(PAUSE_S)
        ws.send(json.dumps({"type": "stop"}))
        while True:
            msg = json.loads(ws.recv(timeout=LIMIT_S))
            assert msg["type"] != "error", msg
            if msg["type"] == "done":
                break
            if msg["type"] == "caption" and msg["final"]:
                got.append(msg["text"])
    finals[room] = got


def _segment_cues(client: httpx.Client, playlist_url: str) -> tuple[bool, dict[str, list]]:
    """Whether the playlist is the ended one, and each of its segments' cues by URI."""
    r = client.get(playlist_url)
    assert r.status_code == 200, r.text
    playlist = m3u8.loads(r.text)
    segments = {}
    for seg in playlist.segments:
        body = client.get(urljoin(playlist_url, seg.uri))
        assert body.status_code == 200, body.text
        segments[seg.uri.split("?")[0]] = [
            (c.identifier, c.start_time.in_milliseconds(), c.end_time.in_milliseconds(),
             html.unescape(c.text)) for c in webvtt.from_string(body.text).captions]
    return playlist.is_endlist, segments


def _check(segments: dict[str, list[Cue]], whole: bool = True) -> list[Cue]:
    """The rule on what was published: returns the distinct cues, by start. ``whole``:
    every cue's successor is among them; not so for what a player saw while the talk ran,
    whose last cue may be cut at the start of a cue in a segment published after its last
    look (its times are checked in the ended playlist, where its segment is the same)."""
    by_id: dict[str, Cue] = {}
    for uri, cues in segments.items():
        for cue in cues:
            assert by_id.setdefault(cue[0], cue) == cue, (uri, cue, by_id[cue[0]])
    cues = sorted(by_id.values(), key=lambda c: c[1])
    for cue, nxt in zip(cues, [*cues[1:], None], strict=True):
        _, start, end, text = cue
        assert end - start >= MIN_CUE_MS, cue
        if nxt is None:
            assert end - start >= reading_ms(text) or not whole, cue
        else:
            assert end <= nxt[1], (cue, nxt)  # never overlaps the next cue
            assert end - start >= reading_ms(text) or end == nxt[1], (cue, nxt)
    return cues


def test_cues_published_under_load_are_long_enough_and_never_overlap(server) -> None:
    finals: dict[str, list[str]] = {}
    speakers = [threading.Thread(target=_talk, args=(server, room, finals)) for room in ROOMS]
    for thread in speakers:
        thread.start()
    live: dict[str, list[Cue]] = {}
    url = f"{server.url}/v1/rooms/{ROOMS[0]}/hls/de.m3u8"
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + LIMIT_S
        while any(t.is_alive() for t in speakers) and time.monotonic() < deadline:
            r = client.get(url)
            if r.status_code == 200:  # 404 until the room's talk is known
                ended, segments = _segment_cues(client, url)
                if not ended:
                    live.update(segments)
            time.sleep(0.3)
        for thread in speakers:
            thread.join(LIMIT_S)
        assert sorted(finals) == ROOMS
        time.sleep(4.0)  # the just-ended grace (a segment and the settle) is over
        for room in ROOMS:
            room_url = f"{server.url}/v1/rooms/{room}/hls/de.m3u8"
            ended, segments = _segment_cues(client, room_url)
            assert ended
            if room == ROOMS[0]:
                for uri, cues in live.items():  # a published segment never changed
                    assert segments.get(uri) == cues, uri
            cues = _check(segments)
            assert [c[3] for c in cues] == [" ".join(t.split()) for t in finals[room]]
            transcript = client.get(f"{server.url}/v1/rooms/{room}/transcript",
                                    params={"lang": "de", "format": "vtt"})
            assert transcript.status_code == 200, transcript.text
            # the download's cues follow the same rule (times differ only where a final
            # came later than the hold: app.rooms.hls.timeline)
            _check({"transcript": [
                (c.identifier, c.start_time.in_milliseconds(), c.end_time.in_milliseconds(),
                 html.unescape(c.text)) for c in webvtt.from_string(transcript.text).captions]})
    assert live, "the live playlist published no segment during the talk"
    _check(live, whole=False)
