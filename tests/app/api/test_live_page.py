"""The caption web page in headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.asr_streams import short_stream

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[3] / "artifacts"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian package 'chromium' is not installed")
def test_page_replays_a_stream_and_shows_final_captions(live_server, data_dir,
                                                         tmp_path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    stream = short_stream(data_dir, tmp_path)

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.goto(live_server.url + "/live?speed=4")
        page.check('#targets input[value="de"]')
        page.set_input_files("#file", str(stream))
        page.click("#replay")
        page.wait_for_function(
            "document.querySelectorAll('#captions [data-final=\"1\"]').length === 2",
            timeout=120_000)
        finals = page.locator('#captions [data-final="1"]').all_inner_texts()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "live_page.png"), full_page=True)
        browser.close()
    assert len(finals) == 2 and all(text.strip() for text in finals)
