"""The broadcast overlay: ``/watch?...&overlay=1`` as OBS's browser source shows it.

A speaker replays the first utterances of a recorded ASR stream into a room; two overlay
pages (1920x1080 and 1280x720, OBS's usual canvases) show the room's German captions. Each
screenshot, taken with Chromium's background transparent as OBS's browser source has it,
must be transparent everywhere outside the caption box, hold the captions inside it, show
no controls and at most the lines asked for. Then every query option, valid and not: valid
ones take effect, out-of-range or malformed ones leave their defaults, and none becomes
markup or CSS. Screenshots go to a temporary folder, or to tests/artifacts/ with
``LIVETRANS_UPDATE_REFERENCES=1`` (the overlay's own references; the caption screen's are
test_watch_page.py's).

Debian's ``chromium`` driven by Playwright, like test_watch_page.py; skipped without them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.app.api.pixels import png_pixels

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = (Path(__file__).resolve().parents[2] / "artifacts"
             if os.environ.get("LIVETRANS_UPDATE_REFERENCES") == "1"
             else Path(tempfile.gettempdir()) / "livetrans-screenshots")
WAIT_MS = 300_000  # generous: a bound against hanging, never a latency assertion
CANVASES = [(1920, 1080), (1280, 720)]

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian package 'chromium' is not installed")


def asr_events(data_dir: Path, utterances: int = 3) -> list[dict]:
    """The first utterances of the ACL 60/60 dev stream: one partial and the final each."""
    src = data_dir / "asr_partials" / "acl6060_dev_en.jsonl"
    events: list[dict] = []
    for segment, line in enumerate(src.read_text().splitlines()[:utterances]):
        utt = json.loads(line)
        part = [e for e in utt["events"] if e["type"] == "partial"]
        final = [e for e in utt["events"] if e["type"] == "final"][-1]
        for ev in [*part[len(part) // 2:][:1], final]:
            events.append({"type": ev["type"], "segment": segment, "text": ev["text"]})
    return events


def open_overlay(browser, url: str, size: tuple[int, int]):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]},
                                  reduced_motion="reduce")
    page = context.new_page()
    page.goto(url)
    return context, page


def box_of(page) -> dict:
    box = page.locator("#box").bounding_box()
    assert box is not None
    return box


def check_transparent_outside(png: bytes, box: dict, size: tuple[int, int]) -> np.ndarray:
    """Every pixel outside the caption box is fully transparent; the box's pixels."""
    rgba = png_pixels(png)
    assert rgba.shape[:2] == (size[1], size[0])
    x0, y0 = max(0, math.floor(box["x"]) - 1), max(0, math.floor(box["y"]) - 1)
    x1 = min(size[0], math.ceil(box["x"] + box["width"]) + 1)
    y1 = min(size[1], math.ceil(box["y"] + box["height"]) + 1)
    outside = np.ones(rgba.shape[:2], dtype=bool)
    outside[y0:y1, x0:x1] = False
    assert int(rgba[..., 3][outside].max()) == 0, "opaque pixels outside the captions"
    return rgba[y0:y1, x0:x1]


def overlay_style(page) -> dict:
    return page.evaluate("""() => {
      const box = document.getElementById('box'), p = document.querySelector('#finals p');
      const cs = getComputedStyle(box), ps = p ? getComputedStyle(p) : null;
      return {fontSize: parseFloat(cs.fontSize), lineHeight: parseFloat(cs.lineHeight),
              background: cs.backgroundColor, textAlign: cs.textAlign,
              fontWeight: cs.fontWeight, color: ps && ps.color,
              stroke: ps && parseFloat(ps.webkitTextStrokeWidth),
              strokeColor: ps && ps.webkitTextStrokeColor,
              partial: getComputedStyle(document.getElementById('partial')).display,
              controls: getComputedStyle(document.getElementById('controls')).display,
              status: getComputedStyle(document.getElementById('status')).display,
              elements: document.getElementsByTagName('*').length,
              scripts: document.scripts.length, title: document.title,
              position: document.documentElement.dataset.position,
              align: document.documentElement.dataset.align};
    }""")


def test_the_overlay_shows_a_talks_last_lines_on_a_transparent_page(
        live_server, chromium, data_dir) -> None:
    from websockets.sync.client import connect

    room = "overlay-room"
    events = asr_events(data_dir)
    overlays = []
    for size in CANVASES:
        context, page = open_overlay(
            chromium, f"{live_server.url}/watch?room={room}&lang=de&overlay=1", size)
        page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
        overlays.append((size, context, page))

    ws_url = live_server.url.replace("http://", "ws://") + "/v1/live"
    with connect(ws_url, open_timeout=60, max_size=None) as speaker:
        speaker.send(json.dumps({"type": "start", "target_langs": ["de"], "room": room}))
        assert json.loads(speaker.recv(timeout=60))["type"] == "ready"

        def speak() -> None:
            for ev in events:
                speaker.send(json.dumps(ev))
                time.sleep(0.25)
            speaker.send(json.dumps({"type": "stop"}))

        sender = threading.Thread(target=speak, daemon=True)
        sender.start()
        finals = []
        while True:
            msg = json.loads(speaker.recv(timeout=WAIT_MS / 1000))
            if msg["type"] == "done":
                break
            assert msg["type"] == "caption", msg
            if msg["final"]:
                finals.append(msg["display_text"])
        sender.join()
    assert len(finals) == len({e["segment"] for e in events})

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for size, context, page in overlays:
        page.wait_for_selector('body[data-ended="1"]', timeout=WAIT_MS)
        shown = page.eval_on_selector_all("#finals p", "ps => ps.map(p => p.textContent)")
        assert shown == finals
        style = overlay_style(page)
        assert style["controls"] == "none" and style["status"] == "none"
        assert style["fontSize"] == pytest.approx(54 * size[1] / 1080, abs=0.05)
        box = box_of(page)
        # the last two lines (the default), at the bottom of the frame, 6 % above its edge
        assert box["height"] <= 2 * style["lineHeight"] + 1
        assert box["y"] + box["height"] == pytest.approx(size[1] * 0.94, abs=1.5)
        assert box["x"] >= 0 and box["x"] + box["width"] <= size[0]
        png = page.screenshot(omit_background=True)
        (ARTIFACTS / f"overlay_{size[0]}x{size[1]}.png").write_bytes(png)
        inside = check_transparent_outside(png, box, size)
        opaque = inside[..., 3] == 255
        assert (opaque & (inside[..., :3].min(axis=2) > 200)).sum() > 200  # white text
        assert (opaque & (inside[..., :3].max(axis=2) < 60)).sum() > 200  # its outline
        context.close()


def test_valid_options_set_size_position_colours_outline_and_lines(live_server,
                                                                   chromium) -> None:
    size = (1280, 720)
    query = ("overlay=1&room=options-room&lang=de&lines=3&size=40&position=top&align=left"
             "&margin=10&width=50&color=%23ffff00&outline=0&bg=00000080&weight=400"
             "&partials=0")
    context, page = open_overlay(chromium, f"{live_server.url}/watch?{query}", size)
    page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
    assert page.locator("#box").is_hidden()  # no caption yet: no empty box on the video
    for seg in range(6):
        page.evaluate("s => onCaption({segment: s, final: true, lang: 'de', "
                      "display_text: 'Zeile ' + s + ' mit etwas mehr Text darin'})", seg)
    page.evaluate("onCaption({segment: 6, final: false, lang: 'de', display_text: 'teil'})")
    style = overlay_style(page)
    assert style["fontSize"] == pytest.approx(40 * 720 / 1080, abs=0.05)
    assert style["color"] == "rgb(255, 255, 0)" and style["stroke"] == 0
    assert style["background"] == "rgba(0, 0, 0, 0.5)"
    assert style["textAlign"] == "left" and style["fontWeight"] == "400"
    assert style["partial"] == "none"  # partials=0: finals only
    box = box_of(page)
    assert box["y"] == pytest.approx(72, abs=1) and box["x"] == pytest.approx(72, abs=1)
    assert box["width"] <= 640 + 0.5
    assert box["height"] <= 3 * style["lineHeight"] + 1
    png = page.screenshot(omit_background=True)
    (ARTIFACTS / "overlay_options_1280x720.png").write_bytes(png)
    inside = check_transparent_outside(png, box, size)
    alpha = inside[2:-2, 2:-2, 3]
    assert int(np.median(alpha)) == pytest.approx(128, abs=2)  # the half-transparent box
    context.close()


def test_hold_takes_the_lines_off_the_video_after_the_last_caption(live_server,
                                                                    chromium) -> None:
    context, page = open_overlay(
        chromium, f"{live_server.url}/watch?overlay=1&room=hold-room&lang=de&hold=0.5",
        (1280, 720))
    page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
    for seg in range(2):
        page.evaluate("s => onCaption({segment: s, final: true, lang: 'de', "
                      "display_text: 'Satz ' + s})", seg)
        assert page.locator("#box").is_visible()  # a new caption brings the lines back
        page.wait_for_selector("#box", state="hidden", timeout=WAIT_MS)
    png = page.screenshot(omit_background=True)
    assert int(png_pixels(png)[..., 3].max()) == 0  # nothing left on the video
    context.close()


def test_a_refusal_never_shows_on_the_video(live_server, chromium) -> None:
    """The caption screen says why it cannot show captions; the overlay says nothing."""
    for query in ("overlay=1&room=-no+such+room!&lang=de", "overlay=1&room=r&lang=xx",
                  "overlay=1&lang=de"):
        context, page = open_overlay(chromium, f"{live_server.url}/watch?{query}",
                                     (1280, 720))
        page.wait_for_selector('body[data-state="refused"]', timeout=WAIT_MS)
        assert page.text_content("#partial").strip()  # the reason is there, for a browser
        png = page.screenshot(omit_background=True)
        assert int(png_pixels(png)[..., 3].max()) == 0, query  # but not on the video
        context.close()


MALFORMED = {
    "lines": "0", "size": "1e9", "position": "evil", "align": "javascript:x",
    "margin": "NaN", "width": "Infinity", "outline": "-1", "weight": "bold",
    "partials": "2", "color": "red;}body{background:red", "partial_color": "url(x)",
    "outline_color": "#zzz", "bg": "</style><script>document.title='pwned'</script>",
    "hold": "-1",
}


@pytest.mark.parametrize("values", [
    MALFORMED,
    {"lines": "13", "size": "11", "margin": "46", "width": "19", "outline": "21",
     "weight": "1000", "color": "#12345", "bg": "ffffffff0"},  # just out of range
    {"lines": "2.5", "size": " 54px", "outline": "0x3", "color": "#ff 00 00"},
], ids=["malformed", "out-of-range", "almost-numbers"])
def test_bad_options_leave_their_defaults_and_never_become_markup(
        live_server, chromium, values: dict) -> None:
    from urllib.parse import urlencode

    size = (1280, 720)
    base = {"overlay": "1", "room": "bad-options", "lang": "de"}
    pages = {}
    for name, query in (("default", base), ("bad", {**base, **values})):
        context, page = open_overlay(chromium, f"{live_server.url}/watch?{urlencode(query)}",
                                     size)
        page.wait_for_selector('body[data-state="live"]', timeout=WAIT_MS)
        html = "<img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
        page.evaluate("t => onCaption({segment: 1, final: true, lang: 'de', display_text: t})",
                      html)
        assert page.eval_on_selector_all("#finals p", "ps => ps.map(p => p.textContent)") \
            == [html]
        pages[name] = (context, page, overlay_style(page), box_of(page))
    _, page, bad, box = pages["bad"]
    _, _, default, default_box = pages["default"]
    assert bad == default  # every computed value, the element count and the title
    assert box == default_box
    assert bad["fontSize"] == pytest.approx(54 * 720 / 1080, abs=0.05)
    assert bad["color"] == "rgb(255, 255, 255)" and bad["title"] != "pwned"
    assert bad["stroke"] == pytest.approx(2 * 3 * 720 / 1080, abs=0.05)
    assert bad["position"] == "bottom" and bad["align"] == "center"
    assert page.locator("#finals img, #finals b, body > script:not([src])").count() == 1
    check_transparent_outside(page.screenshot(omit_background=True), box, size)
    for context, *_ in pages.values():
        context.close()
