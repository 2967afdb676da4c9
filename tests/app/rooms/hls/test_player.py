"""HLS subtitle renditions read by real clients, on two real replicas (the real model) on
Debian's redis-server, with API keys (the viewer token travels in the playlist's URIs):

- ``ffmpeg`` (Debian's) reads replica b's playlist while a speaker talks on replica a,
  following it to ``#EXT-X-ENDLIST``, and again after the talk: each time every final is a
  cue with the transcript's text, timed by its rule as the segments publish it;
- hls.js (from npm, ``make web-deps``) in headless Chromium (Debian's, driven by Playwright)
  plays a test video that ffmpeg made as HLS, served on loopback with a master playlist
  that adds the room's rendition (``EXT-X-MEDIA TYPE=SUBTITLES``), and shows every final as
  a cue of the video's text track, lined up by the offset with the video's clock.

Skipped where ffmpeg, Chromium, Playwright or hls.js is missing. Waits are bounds against
hanging, never latency assertions.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import m3u8
import pytest
import webvtt

from app.rooms.hls.timeline import HlsTiming, cues_of
from app.rooms.transcripts.store import TranscriptLine
from tests.conftest import LiveServer, free_port
from tests.hls_site import hls_js_site, make_test_video
from tests.redis_server import replicas_on_redis

FFMPEG = shutil.which("ffmpeg") or ("/usr/bin/ffmpeg" if Path("/usr/bin/ffmpeg").exists()
                                    else None)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
KEY = "hls-test-key"
SEGMENT_S = 1
WINDOW_S = 4
LIMIT_S = 300  # a bound against hanging
SENTENCES = ["Good morning everyone.", "Thank you for coming today.", "Let us begin.",
             "The first slide shows the plan.", "Questions come at the end."]
VIDEO_PTS_S = 1.4  # where an ffmpeg-made MPEG-TS stream starts its clock (its mux delay)

pytestmark = pytest.mark.skipif(FFMPEG is None, reason="ffmpeg missing (make system-deps)")


@pytest.fixture(scope="module")
def page_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory,
             page_port: int) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Replicas a and b on one Redis bus; the test page's origin may read them (CORS)."""
    with replicas_on_redis(tmp_path_factory.mktemp("hls-redis"), api_keys=[KEY],
                           hls_segment_s=SEGMENT_S, hls_window_s=WINDOW_S,
                           max_source_chars=2000,
                           cors_origins=[f"http://127.0.0.1:{page_port}"]) as pair:
        yield pair


def _talk(server: LiveServer, room: str, on_ready=None, pause_s: float = 1.5) -> list[dict]:
    """One speaker's talk of SENTENCES in ``room`` (German), a partial and a final each,
    ``pause_s`` apart; ``on_ready(token)`` runs once the talk started. Its final captions."""
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/v1/live"
    finals: list[dict] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"},
                 open_timeout=60, max_size=None) as ws:
        ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready", ready
        if on_ready is not None:
            on_ready(ready["viewer_token"])
        for segment, text in enumerate(SENTENCES):
            words = text.split()
            ws.send(json.dumps({"type": "partial", "segment": segment,
                                "text": " ".join(words[:2])}))
            time.sleep(pause_s / 2)
            ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))
            time.sleep(pause_s / 2)
        ws.send(json.dumps({"type": "stop"}))
        while True:
            msg = json.loads(ws.recv(timeout=LIMIT_S))
            assert msg["type"] != "error", msg
            if msg["type"] == "done":
                break
            if msg["type"] == "caption" and msg["final"]:
                finals.append(msg)
    assert [f["segment"] for f in finals] == list(range(len(SENTENCES)))
    return finals


def _transcript_cues(server: LiveServer, room: str, token: str) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) of every cue of the room's transcript as the HLS segments
    publish it: the transcript download's lines (JSON), timed by ``formats.cue_times``'s
    rule as each segment knew them (``HlsTiming.as_published``: where a final came later
    than the hold, the download's WebVTT times differ). The download's WebVTT has the same
    texts."""
    r = httpx.get(f"{server.url}/v1/rooms/{room}/transcript",
                  params={"lang": "de", "format": "json", "token": token}, timeout=30)
    assert r.status_code == 200, r.text
    lines = [TranscriptLine(x["segment"], x["start"], x["end"], x["source"], x["text"])
             for x in r.json()["lines"]]
    published = HlsTiming(SEGMENT_S, WINDOW_S).as_published(cues_of(lines))
    cues = sorted((c.start_ms, c.end_ms, c.text) for c in published)
    r = httpx.get(f"{server.url}/v1/rooms/{room}/transcript",
                  params={"lang": "de", "format": "vtt", "token": token}, timeout=30)
    assert r.status_code == 200, r.text
    assert [text for _, _, text in _cues(r.text)] == [text for _, _, text in cues]
    return cues


def _cues(text: str) -> list[tuple[int, int, str]]:
    """The distinct cues of a WebVTT text, by start time."""
    found = {(c.start_time.in_milliseconds(), c.end_time.in_milliseconds(),
              html.unescape(c.text)) for c in webvtt.from_string(text).captions}
    return sorted(found)


def _ffmpeg(url: str, out: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen([FFMPEG, "-hide_banner", "-loglevel", "error", "-nostdin",
                             *options, "-i", url, "-f", "webvtt", "-y", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_segments(url: str) -> None:
    """Until the live playlist lists its first segment."""
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200, r.text
        if m3u8.loads(r.text).segments:
            return
        time.sleep(0.2)
    raise AssertionError("the live playlist never listed a segment")


def _wait_for_end(url: str) -> None:
    """Until the playlist ends (``#EXT-X-ENDLIST``: a moment after the talk did)."""
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        r = httpx.get(url, timeout=30)
        assert r.status_code == 200, r.text
        if m3u8.loads(r.text).is_endlist:
            return
        time.sleep(0.2)
    raise AssertionError("the playlist never ended")


def test_ffmpeg_reads_the_other_replicas_playlist_during_and_after_the_talk(
        replicas, tmp_path: Path) -> None:
    a, b = replicas
    room = "hls-ffmpeg"
    during = tmp_path / "during.vtt"
    started: dict = {}

    def follow(token: str) -> None:  # on replica b, which has no speaker and no viewer
        url = f"{b.url}/v1/rooms/{room}/hls/de.m3u8?token={token}"
        started["url"], started["token"] = url, token

        def run() -> None:
            _wait_for_segments(url)
            live = m3u8.loads(httpx.get(url, timeout=30).text)
            started["live"] = live
            proc = _ffmpeg(url, during, "-live_start_index", "0")
            started["proc"] = proc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        started["thread"] = thread

    finals = _talk(a, room, on_ready=follow)
    started["thread"].join(LIMIT_S)
    live = started["live"]
    assert not live.is_endlist and live.media_sequence == 0  # ffmpeg began on a live one
    proc: subprocess.Popen = started["proc"]
    _, err = proc.communicate(timeout=LIMIT_S)  # it ends at #EXT-X-ENDLIST
    assert proc.returncode == 0, err
    url, token = started["url"], started["token"]
    expected = _transcript_cues(b, room, token)
    assert [text for _, _, text in expected] == [html.unescape(f["text"]) for f in finals]
    assert _cues(during.read_text()) == expected
    after = tmp_path / "after.vtt"
    proc = _ffmpeg(url, after)
    _, err = proc.communicate(timeout=LIMIT_S)
    assert proc.returncode == 0, err
    assert _cues(after.read_text()) == expected
    ended = m3u8.loads(httpx.get(url, timeout=30).text)
    assert ended.is_endlist and ended.media_sequence == 0
    assert all(s.uri.endswith(f"?token={token}") for s in ended.segments)


# -- hls.js in Chromium --------------------------------------------------------------------
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>hls subtitles</title>
<script src="/hls.min.js"></script></head>
<body><video id="v" muted playsinline width="320" height="240"></video>
<script>
window.errors = [];
const video = document.getElementById('v');
const hls = new Hls({subtitleDisplay: true, renderTextTracksNatively: true});
hls.on(Hls.Events.ERROR, (_, d) => window.errors.push(`${d.type}:${d.details}:${d.fatal}`));
hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED, () => {
  hls.subtitleTrack = 0;
  hls.subtitleDisplay = true;
});
hls.on(Hls.Events.MANIFEST_PARSED, () => {
  video.play().catch(e => window.errors.push('play:' + e));
});
hls.loadSource(location.hash.slice(1) || '/master.m3u8');
hls.attachMedia(video);
window.cues = () => Array.from(video.textTracks)
  .filter(t => t.kind === 'subtitles' || t.kind === 'captions')
  .flatMap(t => Array.from(t.cues || []).map(c => [t.language, c.startTime, c.endTime, c.text]));
</script></body></html>
"""


def _master(subtitles_url: str) -> str:
    """The master playlist an organiser writes: their video, plus livetrans' rendition."""
    return ("#EXTM3U\n"
            '#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="Deutsch",LANGUAGE="de",'
            f'DEFAULT=YES,AUTOSELECT=YES,URI="{subtitles_url}"\n'
            '#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,SUBTITLES="subs"\n'
            "video.m3u8\n")


def _make_video(folder: Path, seconds: int) -> None:
    make_test_video(FFMPEG, folder, seconds, LIMIT_S)


@pytest.fixture()
def page_server(tmp_path: Path, page_port: int) -> Iterator[Path]:
    """The organiser's site on loopback: the page, hls.js, the video and the master."""
    with hls_js_site(tmp_path / "site", PAGE, page_port) as root:
        yield root


def test_hls_js_shows_every_final_as_a_cue_of_the_videos_text_track(
        replicas, page_server: Path, page_port: int, chromium) -> None:
    a, b = replicas
    room = "hls-player"
    tokens: list[str] = []
    finals = _talk(a, room, on_ready=tokens.append, pause_s=1.0)
    expected = _transcript_cues(b, room, tokens[0])
    _make_video(page_server, seconds=int(expected[-1][1] / 1000) + 6)
    # the talk started as the video's clock did: its 1.4 s are the offset
    subtitles = f"{b.url}/v1/rooms/{room}/hls/de.m3u8?token={tokens[0]}&offset={VIDEO_PTS_S}"
    _wait_for_end(subtitles)  # the whole talk, as hls.js gets it after the talk
    (page_server / "master.m3u8").write_text(_master(subtitles), encoding="utf-8")
    shown = _shown_cues(chromium, page_port, "/master.m3u8", len(expected))
    assert [text for _, _, text in shown] == [html.unescape(f["text"]) for f in finals]
    for (start, end, _), (want_start, want_end, _) in zip(shown, expected, strict=True):
        # the transcript's times on the video's clock (hls.js computes in floating point)
        assert abs(start - want_start) <= 2 and abs(end - want_end) <= 2
    # without the offset the talk's second 0 is the video's presentation time 0, which
    # is 1.4 s before the video's first frame: every cue shows 1.4 s earlier
    (page_server / "early.m3u8").write_text(_master(subtitles.split("&offset=")[0]),
                                            encoding="utf-8")
    shift = round(VIDEO_PTS_S * 1000)
    visible = [(max(s - shift, 0), e - shift, t) for s, e, t in expected if e > shift]
    early = _shown_cues(chromium, page_port, "/early.m3u8", len(visible))
    assert len(early) == len(visible)  # hls.js drops a cue that ends before time 0
    for (start, end, text), (want_start, want_end, want_text) in zip(early, visible,
                                                                     strict=True):
        assert text == want_text
        assert abs(start - want_start) <= 2 and abs(end - want_end) <= 2

def _shown_cues(chromium, page_port: int, master: str,
                count: int) -> list[tuple[int, int, str]]:
    """(start ms, end ms, text) of the cues hls.js put on the video's text track."""
    page = chromium.new_page()
    try:
        page.goto(f"http://127.0.0.1:{page_port}/index.html#{master}")
        page.wait_for_function(f"window.cues().length >= {count}", timeout=LIMIT_S * 1000)
        cues = page.evaluate("window.cues()")
        errors = page.evaluate("window.errors")
    finally:
        page.close()
    assert not [e for e in errors if e.endswith(":true")], errors  # nothing fatal
    assert {lang for lang, *_ in cues} == {"de"}
    return sorted({(round(start * 1000), round(end * 1000), html.unescape(text))
                   for _, start, end, text in cues})
