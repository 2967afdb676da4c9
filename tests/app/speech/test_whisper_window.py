"""Whisper over an encoder window fitted to the buffer (``app.speech.whisper_window``): the
window's size, and on real speech (espeak-ng, Whisper base) the same words and times as
faster-whisper's 30 s window, and no words from silence."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from app.speech.recognizer import Transcriber
from app.speech.resample import Resampler
from app.speech.whisper_stream import (
    SAMPLE_RATE,
    WhisperTranscriber,
    load_whisper,
    whisper_transcriber,
)
from app.speech.whisper_window import (
    MAX_FRAMES,
    FittedWindowTranscriber,
    repeats_itself,
    window_frames,
)
from tests.speech import SENTENCES, needs_espeak, spoken, wer


def test_the_window_holds_the_audio_and_a_margin_in_whole_seconds() -> None:
    assert window_frames(345) == 500  # 3.45 s + 1 s, rounded up to 5 s
    assert window_frames(400) == 500
    assert window_frames(401) == 600
    assert window_frames(0) == 100
    assert window_frames(345, margin_s=0.0, step_s=0.25) == 350


@pytest.mark.parametrize("content", [1, 99, 1999, 2900, 2999, 3000, 5000])
def test_the_window_is_even_covers_the_audio_and_never_exceeds_thirty_seconds(
        content: int) -> None:
    frames = window_frames(content, margin_s=0.37, step_s=0.03)
    assert frames % 2 == 0
    assert frames <= MAX_FRAMES
    assert frames >= min(content, MAX_FRAMES)


def test_an_unknown_window_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown Whisper window 'half'"):
        whisper_transcriber(None, "half")
    assert isinstance(whisper_transcriber(None, "fit"), FittedWindowTranscriber)
    assert isinstance(whisper_transcriber(None, "full"), WhisperTranscriber)
    assert isinstance(FittedWindowTranscriber(None), Transcriber)


@pytest.fixture(scope="module")
def model():
    return load_whisper(threads=2)


def _speech(tmp_path: Path, text: str) -> np.ndarray:
    samples, rate = spoken(tmp_path, text)
    return (Resampler(rate).process(samples.astype(np.float64)) / 32768.0).astype(np.float32)


@needs_espeak
def test_real_speech_gives_the_words_and_times_of_the_full_window(tmp_path, model) -> None:
    fitted, full = FittedWindowTranscriber(model), WhisperTranscriber(model)
    for sentence in SENTENCES:
        audio = _speech(tmp_path, sentence)
        ours, theirs = fitted.transcribe(audio, "en"), full.transcribe(audio, "en")
        text = "".join(w.text for w in ours)
        assert wer(sentence, text) <= 0.3, (sentence, text)
        assert wer("".join(w.text for w in theirs), text) <= 0.2
        # times are the buffer's, in order, within the audio
        assert all(a.start <= a.end <= b.start + 1e-6 for a, b in itertools.pairwise(ours))
        assert ours[-1].end <= len(audio) / SAMPLE_RATE + 0.05
        # the last word ends where the full window puts it (its alignment, 20 ms frames)
        assert abs(ours[-1].end - theirs[-1].end) <= 0.2


@needs_espeak
def test_speech_followed_by_a_long_pause_keeps_its_words(tmp_path, model) -> None:
    speech = _speech(tmp_path, SENTENCES[0])
    audio = np.concatenate([speech, np.zeros(20 * SAMPLE_RATE, dtype=np.float32)])
    text = "".join(w.text for w in FittedWindowTranscriber(model).transcribe(audio, "en"))
    assert wer(SENTENCES[0], text) <= 0.3, text


def test_silence_gives_no_words(model) -> None:
    fitted = FittedWindowTranscriber(model)
    for seconds in (1, 3, 10):
        assert fitted.transcribe(np.zeros(seconds * SAMPLE_RATE, dtype=np.float32), "en") == []


@needs_espeak
def test_more_than_thirty_seconds_goes_to_the_full_window_or_is_refused(tmp_path,
                                                                        model) -> None:
    """A buffer longer than any window (a recogniser that fell far behind) is decoded by
    faster-whisper's 30 s chunks, never dropped; without a fallback it is refused."""
    pause = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    said = [_speech(tmp_path, sentence) for sentence in SENTENCES]
    parts, reference = [], []
    while sum(len(p) for p in parts) <= 31 * SAMPLE_RATE:
        k = len(reference) % 2
        parts += [said[k], pause]
        reference.append(SENTENCES[k])
    audio = np.concatenate(parts)
    full = WhisperTranscriber(model)
    words = FittedWindowTranscriber(model, fallback=full).transcribe(audio, "en")
    text = "".join(w.text for w in words)
    assert wer(" ".join(reference), text) <= 0.3, text
    with pytest.raises(ValueError, match="at most 30 s"):
        FittedWindowTranscriber(model).transcribe(audio, "en")


def test_a_looping_decode_is_told_from_a_sentence(model) -> None:
    tokenizer = FittedWindowTranscriber(model)._tokenizer("en")

    def loops(text: str) -> bool:
        return repeats_itself(tokenizer.encode(text), text)

    sentence = " Local media reports an airport fire vehicle rolled over while responding."
    assert not loops(sentence) and not loops("")
    assert not loops(" Thank you. Thank you.")  # short repeats are speech
    assert loops(sentence * 2)  # a loop the token cap lets through
    assert loops(" Here you have an example. Here you have an example. Here you")
    assert loops(" no" * 40)  # compresses too well


@needs_espeak
def test_a_decode_that_reaches_its_cap_is_decoded_again_over_the_full_window(
        tmp_path, model, monkeypatch) -> None:
    """A loop runs to the token cap: then the 30 s window decodes the buffer (here the cap
    is made too small for the sentence, so the real decode reaches it)."""
    import app.speech.whisper_window as window

    monkeypatch.setattr(window, "TOKENS_PER_S", 0.0)
    monkeypatch.setattr(window, "MIN_TOKENS", 3)
    audio = _speech(tmp_path, SENTENCES[0])
    full = WhisperTranscriber(model)
    fitted = FittedWindowTranscriber(model, fallback=full)
    assert [w.text for w in fitted.transcribe(audio, "en")] == [
        w.text for w in full.transcribe(audio, "en")]
    assert fitted.fallbacks == 1
    alone = FittedWindowTranscriber(model)  # no fallback: nothing rather than a loop
    assert alone.transcribe(audio, "en") == [] and alone.fallbacks == 1
