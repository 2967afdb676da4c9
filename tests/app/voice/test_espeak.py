"""espeak-ng, the fallback voice: real speech from Debian's espeak-ng, text only as data."""

from __future__ import annotations

import pytest

from app.voice import espeak
from app.voice.espeak import EspeakSynthesizer, clean_text, has_voice, voice_name
from tests.app.voice.audio import assert_speech

pytestmark = pytest.mark.skipif(espeak.binary() is None,
                                reason="espeak-ng is not installed (make system-deps)")

SENTENCE = {"en": "Good morning, and welcome to the conference.",
            "de": "Guten Morgen und willkommen zur Konferenz.",
            "zh": "早上好，欢迎参加会议。"}


@pytest.mark.parametrize("lang", sorted(SENTENCE))
def test_speaks_each_language_as_pcm16_of_a_sentences_length(lang: str) -> None:
    synth = EspeakSynthesizer(lang)
    assert synth.info.engine == "espeak-ng" and synth.info.sample_rate == 22050
    assert_speech(synth.synthesize(SENTENCE[lang]), synth.info.sample_rate, 1.0, 6.0)


def test_faster_speech_is_shorter() -> None:
    synth = EspeakSynthesizer("de")
    normal = synth.synthesize(SENTENCE["de"])
    fast = synth.synthesize(SENTENCE["de"], speed=1.5)
    assert_speech(fast, synth.info.sample_rate, 0.5, 6.0)
    assert len(fast) < 0.85 * len(normal)
    # beyond the engine's bound it is clamped, not refused
    assert len(synth.synthesize(SENTENCE["de"], speed=50)) == \
        len(synth.synthesize(SENTENCE["de"], speed=2.0))


def test_text_is_data_never_an_option() -> None:
    synth = EspeakSynthesizer("en")
    # on a command line these would be options (a voice, an output file, help); on stdin
    # they are words, spoken like any others
    for text in ("--help", "-v xx -w /tmp/x.wav", "-- --stdout"):
        assert_speech(synth.synthesize(text), synth.info.sample_rate, 0.2, 6.0)


def test_control_characters_are_spaces_and_blank_text_is_silence() -> None:
    assert clean_text("a\x00b\x1b[31mc\nd\x85") == "a b [31mc d"
    synth = EspeakSynthesizer("en")
    assert synth.synthesize(" \n\x00\t ") == b""
    assert_speech(synth.synthesize("hello\x00 world\x07"), synth.info.sample_rate, 0.3, 4.0)


def test_languages_map_to_espeak_voices() -> None:
    assert voice_name("zh") == "cmn" and voice_name("de") == "de"
    assert has_voice("de") and has_voice("ja") and has_voice("uk")
    assert not has_voice("xx") and not has_voice("-v")
