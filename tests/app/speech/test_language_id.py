"""Whisper's language detection (``app.speech.language_id``) on real speech: espeak-ng
English and German, through the recogniser's one thread; silence is never guessed."""

from __future__ import annotations

import asyncio
import subprocess
import wave
from pathlib import Path

import numpy as np

from app.speech.resample import Resampler
from app.speech.service import SpeechRecognition
from tests.speech import ESPEAK, needs_espeak


def _said(tmp_path: Path, voice: str, text: str) -> np.ndarray:
    path = tmp_path / f"{voice}.wav"
    subprocess.run([ESPEAK or "espeak-ng", "-v", voice, "-s", "150", "-w", str(path), text],
                   check=True)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return (Resampler(rate).process(samples.astype(np.float64)) / 32768).astype(np.float32)


@needs_espeak
def test_the_language_spoken_is_detected_among_those_allowed(tmp_path: Path) -> None:
    speech = SpeechRecognition()
    english = _said(tmp_path, "en-us", "Thank you all for coming to this talk today.")
    # Whisper base hears some espeak German as English; this sentence it hears as German
    german = _said(tmp_path, "de", "Der Ausschuss wird seinen Abschlussbericht im "
                   "nächsten Frühjahr veröffentlichen.")
    silence = np.zeros(16_000 * 4, dtype=np.float32)

    async def main() -> list[str | None]:
        return [await speech.detect_language(english, ["en", "de", "ja"]),
                await speech.detect_language(german, ["en", "de", "ja"]),
                await speech.detect_language(german, ["en", "ja"]),
                await speech.detect_language(silence, ["en", "de"])]

    try:
        found = asyncio.run(main())
    finally:
        speech.close()
    assert found[:2] == ["en", "de"]
    assert found[2] in ("en", "ja")  # only an allowed language, never 'de'
    assert found[3] is None
