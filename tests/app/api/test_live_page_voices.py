"""The operator page's voices (``/live``, "voices"): a run with its target languages
spoken shows each language's voice (engine and voice name from ``ready``), a level meter
that moves while it speaks and how much speech is queued, and a switch that turns the
language's voice off and on (the server answers each switch); in headless Chromium against
the real server, model and espeak-ng."""

from __future__ import annotations

import pytest

from app.voice import espeak
from tests.asr_streams import short_stream
from tests.browser import CHROMIUM, chromium_args

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed"),
    pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng is not installed"),
]


def test_the_operator_sees_each_voice_speak(live_server, data_dir, tmp_path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    stream = short_stream(data_dir, tmp_path)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args())
        page = browser.new_page(viewport={"width": 1280, "height": 500})
        page.goto(live_server.url + "/live?speed=2")
        page.wait_for_selector('#targets input[value="de"]')
        page.check('#targets input[value="de"]')
        page.check("#voices")
        page.set_input_files("#file", str(stream))
        page.click("#replay")
        row = "#voice-list [data-lang='de']"
        page.wait_for_selector(row, timeout=120_000)
        assert "espeak-ng" in page.inner_text(row)
        page.wait_for_function(
            f"document.querySelector(\"{row} .behind\").textContent.startsWith('speaking')"
            f" && parseFloat(document.querySelector(\"{row} .level > span\").style.width) > 0",
            timeout=180_000)
        page.screenshot(path=str(tmp_path / "live-voices.png"))
        page.uncheck(f"{row} .voice-on")  # the operator turns German off, then on again
        page.wait_for_function(f"document.querySelector(\"{row}\").dataset.on === 'false'",
                               timeout=60_000)
        page.check(f"{row} .voice-on")
        page.wait_for_function(f"document.querySelector(\"{row}\").dataset.on === 'true'",
                               timeout=60_000)
        page.wait_for_function(
            "document.querySelectorAll('#captions [data-final=\"1\"]').length === 2",
            timeout=180_000)
        errors = page.locator("#errors li").all_inner_texts()
        browser.close()
    assert errors == []
