"""The operator page's microphone in headless Chromium: a fake capture device plays espeak-ng
speech, the page's AudioWorklet sends 16 kHz PCM, the server's Whisper recognises it, and
captions appear in every language of the run (API.md "Speech in")."""

from __future__ import annotations

import wave

import numpy as np
import pytest

from tests.browser import CHROMIUM, chromium_args
from tests.speech import ESPEAK, SENTENCES, talk, words


@pytest.mark.skipif(CHROMIUM is None or ESPEAK is None,
                    reason="Debian packages 'chromium' and 'espeak-ng' are needed")
def test_speech_from_the_microphone_becomes_captions_in_every_language(live_server,
                                                                        tmp_path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    audio, rate = talk(tmp_path, SENTENCES, pause_s=1.5)
    # Chromium plays the file in a loop: a long silence after the talk keeps the second
    # round from starting before the test has what it needs
    audio = np.concatenate([np.zeros(rate // 2, dtype="<i2"), audio,
                            np.zeros(30 * rate, dtype="<i2")])
    wav = tmp_path / "mic.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(audio.tobytes())

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args(microphone=wav))
        page = browser.new_page()
        page.goto(live_server.url + "/live")
        page.check('#targets input[value="ja"]')  # de is checked already
        page.click("#mic")
        finals = ("[...document.querySelectorAll('#captions .seg')].filter(r => "
                  "r.querySelectorAll('[data-final=\"1\"]').length === 2).length")
        page.wait_for_function(f"{finals} >= 2", timeout=180_000)
        page.click("#stop")
        page.wait_for_function("document.getElementById('status').textContent === 'done'",
                               timeout=120_000)
        rows = page.locator("#captions .seg").all()
        heard = [r.locator(".src").inner_text() for r in rows]
        by_lang = {lang: [r.locator(f'[data-lang="{lang}"]').inner_text() for r in rows]
                   for lang in ("de", "ja")}
        errors = page.locator("#errors li").all_inner_texts()
        browser.close()
    assert errors == []
    for lang, texts in by_lang.items():
        assert all(t.strip() for t in texts[:2]), (lang, texts)
    for said, got in zip(SENTENCES, heard, strict=False):
        content = {w for w in words(said) if len(w) > 3}
        assert len(content & set(words(got))) >= len(content) / 2, (said, got)
