"""Speech for the tests: English sentences spoken by espeak-ng (Debian, ``make
system-deps``), and a word error rate to check what a recogniser heard."""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

ESPEAK = shutil.which("espeak-ng")
needs_espeak = pytest.mark.skipif(ESPEAK is None, reason="Debian package 'espeak-ng' is "
                                  "not installed (make system-deps)")
SENTENCES = ["The committee will publish its final report next spring.",
             "Thank you all for coming to this talk today."]


def spoken(tmp_path: Path, text: str) -> tuple[np.ndarray, int]:
    """``text`` said by espeak-ng: int16 samples and their rate (espeak's own, 22050 Hz)."""
    path = tmp_path / f"say-{abs(hash(text))}.wav"
    subprocess.run([ESPEAK or "espeak-ng", "-v", "en-us", "-s", "150", "-w", str(path), text],
                   check=True)
    with wave.open(str(path)) as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return samples, rate


def talk(tmp_path: Path, sentences: list[str], pause_s: float = 1.2) -> tuple[np.ndarray, int]:
    """The sentences one after another, each followed by ``pause_s`` of silence."""
    parts, rate = [], 0
    for text in sentences:
        samples, rate = spoken(tmp_path, text)
        parts += [samples, np.zeros(int(pause_s * rate), dtype="<i2")]
    return np.concatenate(parts), rate


def talk_wav(tmp_path: Path, sentences: list[str], lead_s: float = 0.0,
             tail_s: float = 0.0, name: str = "talk.wav") -> Path:
    """``talk`` as a mono 16-bit WAV file, with ``lead_s`` and ``tail_s`` of silence around
    it (a player or a fake microphone's input)."""
    audio, rate = talk(tmp_path, sentences)
    audio = np.concatenate([np.zeros(int(lead_s * rate), dtype="<i2"), audio,
                            np.zeros(int(tail_s * rate), dtype="<i2")])
    path = tmp_path / name
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(audio.astype("<i2").tobytes())
    return path


def words(text: str) -> list[str]:
    return [w.strip(".,!?;:").lower() for w in text.split()]


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: word-level edit distance over the reference's length."""
    r, h = words(reference), words(hypothesis)
    d = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, d[0] = d[0], i
        for j, hw in enumerate(h, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (rw != hw))
    return d[-1] / len(r)
