"""What the voice tests read of PCM16: loudness and length (no engine, no clock)."""

from __future__ import annotations

import numpy as np


def samples(pcm: bytes) -> np.ndarray:
    assert len(pcm) % 2 == 0, "PCM16 has whole samples"
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0


def rms(pcm: bytes) -> float:
    s = samples(pcm)
    return float(np.sqrt(np.mean(s * s))) if len(s) else 0.0


def assert_speech(pcm: bytes, sample_rate: int, min_s: float, max_s: float) -> float:
    """Audible (not silence, not clipped noise) and of a length speech of that text has;
    its seconds."""
    seconds = len(pcm) / 2 / sample_rate
    assert min_s <= seconds <= max_s, seconds
    level = rms(pcm)
    assert 0.01 < level < 0.7, level
    return seconds
