"""The caption screen's listen button (``/watch``, ``app/static/listen.js``): a listener in
headless Chromium taps "Listen" while a talk runs with the room's German voice
(espeak-ng), and hears it: Web Audio's analyser on what the page plays reads sound, not
silence; the captions stay on screen. Over WebRTC (WHEP, the default) the listener's
connection is cut by the server mid-talk and the page makes it again by itself, and hears
on; over HLS (``?listen=hls``, the fallback) it plays the playlist's live edge. Waits are
bounds against hanging."""

from __future__ import annotations

import json
import threading
import time

import pytest

from app.voice import espeak
from tests.browser import CHROMIUM, chromium_args
from tests.conftest import LiveServer

LIMIT_S = 300
SENTENCES = ["Good morning and welcome to the conference.",
             "Today we talk about voices for every listener.",
             "Thank you all for coming to this session today.",
             "The next speaker will talk about the city's new bridge."]

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed"),
    pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng is not installed"),
]


def _talk(server: LiveServer, room: str, listening: threading.Event,
          done: threading.Event) -> None:
    """A talk in ``room`` with its German voice, once the listener is listening."""
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/v1/live"
    with connect(url, open_timeout=60, max_size=None) as ws:
        ws.send(json.dumps({"type": "start", "room": room, "target_langs": ["de"],
                            "display": "append", "voices": ["de"]}))
        assert json.loads(ws.recv(timeout=60))["type"] == "ready"
        listening.wait(LIMIT_S)
        segment = 0
        while not done.is_set() and segment < 60:  # it talks while the listener listens
            text = SENTENCES[segment % len(SENTENCES)]
            words = text.split()
            ws.send(json.dumps({"type": "partial", "segment": segment,
                                "text": " ".join(words[:4])}))
            time.sleep(1.0)
            ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))
            done.wait(2.0)
            segment += 1
        ws.send(json.dumps({"type": "stop"}))
        while True:
            msg = ws.recv(timeout=LIMIT_S)
            if isinstance(msg, str) and json.loads(msg)["type"] == "done":
                return


@pytest.mark.parametrize("mode", ["webrtc", "hls"])
def test_a_listener_taps_listen_and_hears_the_rooms_voice(live_server, tmp_path,
                                                          mode: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    if mode == "webrtc":
        pytest.importorskip("aiortc", reason="aiortc is the speech extra's")
    room = "listen-" + str(int(time.time()))
    listening, done = threading.Event(), threading.Event()
    speaker = threading.Thread(target=_talk, args=(live_server, room, listening, done),
                               daemon=True)
    speaker.start()
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=chromium_args())
            page = browser.new_page(viewport={"width": 390, "height": 844})
            extra = "&listen=hls" if mode == "hls" else ""
            page.goto(f"{live_server.url}/watch?room={room}&lang=de{extra}")
            page.wait_for_function("document.body.dataset.state === 'live'",
                                   timeout=LIMIT_S * 1000)
            assert page.is_visible("#listen")
            page.click("#listen")  # the user's gesture: sound may start
            page.evaluate("window.loud = 0; setInterval(() => { if (window.roomVoice && "
                          "window.roomVoice.level() > 0.01) window.loud++; }, 25)")
            listening.set()
            page.wait_for_function("window.loud > 40", timeout=LIMIT_S * 1000)
            assert page.evaluate("window.roomVoice.mode") == mode
            if mode == "webrtc":  # the server drops the listener: the page comes back
                first = page.evaluate("window.roomVoice.location")
                assert first and "/whep/" in first
                page.evaluate("fetch(window.roomVoice.location, {method: 'DELETE'})")
                page.wait_for_function(
                    f"window.roomVoice.location && window.roomVoice.location !== '{first}' "
                    "&& window.roomVoice.pc.connectionState === 'connected'",
                    timeout=LIMIT_S * 1000)
                page.evaluate("window.loud = 0")
                page.wait_for_function("window.loud > 40", timeout=LIMIT_S * 1000)
            page.wait_for_function("document.querySelectorAll('#finals p').length >= 2",
                                   timeout=LIMIT_S * 1000)
            assert page.get_attribute("#listen", "aria-pressed") == "true"
            assert page.is_visible("#listen-level")
            page.screenshot(path=str(tmp_path / "watch-listen.png"))
            page.click("#listen")  # and off again
            assert page.get_attribute("#listen", "aria-pressed") == "false"
            browser.close()
    finally:
        listening.set()
        done.set()
        speaker.join(LIMIT_S)


def test_the_overlay_has_no_listen_button(live_server) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args())
        page = browser.new_page()
        page.goto(f"{live_server.url}/watch?room=any-room&lang=de&overlay=1")
        assert page.is_hidden("#listen")
        browser.close()
