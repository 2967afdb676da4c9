"""The caption screen (/watch) after a talk, in Debian's headless Chromium, on a real server
with an API key (the real model):

- a screen that watched the talk keeps its last lines, says the talk ended and links the
  talk's transcript (with its token and the talk's id); when the room's next talk starts it
  shows that one, without a reload;
- a screen opened after a talk (a room viewer token, or the talk's own token) shows the
  talk's last lines from its transcript, and that it ended.

Screenshots go to a temporary folder (``livetrans-screenshots``). Waits are bounds against
hanging, never latency assertions.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(tempfile.gettempdir()) / "livetrans-screenshots"
KEY = "after-talk-key"
ROOM = "hall-b"
WAIT_MS = 300_000  # a bound against hanging
FIRST = ["Good morning.", "Welcome to the first talk.", "Thank you for listening."]
SECOND = ["Hello again.", "This is the second talk."]

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian package 'chromium' is not installed")


@pytest.fixture(scope="module")
def server():
    with LiveServer(api_keys=[KEY], max_source_chars=2000, queue_size=64) as server:
        yield server


def _room_token(server: LiveServer) -> str:
    r = httpx.post(f"{server.url}/v1/rooms/{ROOM}/viewer-tokens",
                   headers={"Authorization": f"Bearer {KEY}"}, json={}, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()["token"]


def _talk(server: LiveServer, sentences: list[str]) -> tuple[str, list[str]]:
    """One talk in ROOM (English to German): its viewer token and its German finals."""
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/v1/live"
    finals: list[str] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"},
                 open_timeout=60, max_size=None) as ws:
        ws.send(json.dumps({"type": "start", "target_lang": "de", "room": ROOM}))
        ready = json.loads(ws.recv(timeout=60))
        assert ready["type"] == "ready", ready
        for segment, text in enumerate(sentences):
            ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))
        ws.send(json.dumps({"type": "stop"}))
        while True:
            msg = json.loads(ws.recv(timeout=300))
            assert msg["type"] != "error", msg
            if msg["type"] == "done":
                break
            if msg["type"] == "caption" and msg["final"]:
                finals.append(msg["text"])
    assert len(finals) == len(sentences)
    return ready["viewer_token"], finals


def _lines(page) -> list[str]:
    return page.eval_on_selector_all('#finals [data-final="1"]',
                                     "els => els.map(e => e.textContent)")


def _screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))


def test_the_screen_keeps_the_last_lines_links_the_transcript_and_follows_the_next_talk(
        server, chromium) -> None:
    token = _room_token(server)
    context = chromium.new_context(viewport={"width": 1280, "height": 720},
                                   reduced_motion="reduce")
    page = context.new_page()
    page.goto(f"{server.url}/watch?room={ROOM}&lang=de&token={token}")
    page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)

    _, first = _talk(server, FIRST)
    page.wait_for_selector('body[data-ended="1"] #ended:not([hidden])', timeout=WAIT_MS)
    page.wait_for_function(f"document.querySelectorAll('#finals p').length === {len(first)}",
                           timeout=WAIT_MS)
    assert _lines(page) == first  # the last lines stay
    assert page.inner_text("#ended-text") == "The talk has ended."
    assert "next talk" in page.inner_text("#ended-next")
    assert page.inner_text("#partial") == ""  # no "waiting for captions" under them
    # the link names the talk (read from its transcript) and carries the screen's token
    page.wait_for_function(
        "document.getElementById('ended-transcript').href.includes('talk=')", timeout=WAIT_MS)
    href = page.get_attribute("#ended-transcript", "href")
    assert href.startswith(f"/v1/rooms/{ROOM}/transcript?") and f"token={token}" in href
    body = httpx.get(server.url + href, timeout=30)
    assert body.status_code == 200 and body.text.splitlines() == first
    _screenshot(page, "watch-after-talk.png")

    # the room's next talk: the screen shows it by itself (the old lines make way)
    page.wait_for_function("document.body.dataset.state === 'ended' && "
                           "document.getElementById('status-text').textContent"
                           ".includes('waiting for the next')", timeout=WAIT_MS)
    _, second = _talk(server, SECOND)
    # (the first talk had more lines: they were cleared, and the second talk's came)
    page.wait_for_function(f"document.querySelectorAll('#finals p').length === {len(second)}",
                           timeout=WAIT_MS)
    assert _lines(page) == second
    page.wait_for_selector('body[data-ended="1"]', timeout=WAIT_MS)  # and it ended too
    page.wait_for_function(
        "document.getElementById('ended-transcript').href.includes('talk=')", timeout=WAIT_MS)
    second_href = page.get_attribute("#ended-transcript", "href")
    assert second_href != href
    assert httpx.get(server.url + second_href, timeout=30).text.splitlines() == second
    _screenshot(page, "watch-next-talk-ended.png")
    context.close()


def test_a_screen_opened_after_the_talk_shows_its_last_lines(server, chromium) -> None:
    talk_token, finals = _talk(server, FIRST)
    for name, token in (("room", _room_token(server)), ("talk", talk_token)):
        context = chromium.new_context(viewport={"width": 390, "height": 844},
                                       has_touch=True, reduced_motion="reduce")
        page = context.new_page()
        page.goto(f"{server.url}/watch?room={ROOM}&lang=de&token={token}")
        page.wait_for_selector('body[data-ended="1"] #ended:not([hidden])', timeout=WAIT_MS)
        page.wait_for_function(
            f"document.querySelectorAll('#finals p').length === {len(finals)}",
            timeout=WAIT_MS)
        assert _lines(page) == finals
        assert page.inner_text("#ended-text") == "The talk has ended."
        if name == "talk":  # a talk's token cannot follow the room's next talk
            assert "that talk only" in page.inner_text("#ended-next")
        _screenshot(page, f"watch-opened-after-talk-{name}-token.png")
        context.close()
