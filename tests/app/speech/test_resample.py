"""Streaming resampling to 16 kHz: pitch, duration and level kept, aliasing filtered,
and a stream cut into any blocks gives the samples of the whole stream."""

from __future__ import annotations

import numpy as np
import pytest

from app.speech.resample import RATE, Resampler, to_pcm16
from tests.clients.test_audio import dominant_hz, tone


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100, 48000])
def test_resampling_keeps_pitch_and_duration(rate) -> None:
    out = Resampler(rate).process(tone(440, rate, 1.0))
    assert abs(len(out) - RATE) <= 2
    assert abs(dominant_hz(out, RATE) - 440) <= 2
    # the level survives (the low-pass has unity gain in the pass band)
    assert 0.9 < np.sqrt(np.mean(out[200:-200] ** 2)) / (10000 / np.sqrt(2)) < 1.1


def test_downsampling_filters_what_would_alias() -> None:
    """12 kHz at 48 kHz would fold onto 4 kHz at 16 kHz without the low-pass."""
    out = Resampler(48000).process(tone(12000, 48000, 1.0))
    assert np.sqrt(np.mean(out[200:-200] ** 2)) < 0.01 * 10000


@pytest.mark.parametrize("rate", [8000, 22050, 44100])
def test_resampling_in_blocks_equals_all_at_once(rate) -> None:
    x = np.random.default_rng(0).normal(0, 3000, rate)
    whole = Resampler(rate).process(x)
    r = Resampler(rate)
    cuts = np.sort(np.random.default_rng(1).choice(np.arange(1, len(x)), 40, replace=False))
    parts = [r.process(p) for p in np.split(x, cuts)]
    assert np.allclose(np.concatenate(parts), whole)


def test_to_pcm16_clips_and_rounds() -> None:
    got = np.frombuffer(to_pcm16(np.array([0.4, 0.6, -40000.0, 40000.0])), dtype="<i2")
    assert got.tolist() == [0, 1, -32768, 32767]
