"""The streaming recogniser on real speech: espeak-ng (Debian, ``make system-deps``) says two
sentences with a pause; Whisper base (the bundled CTranslate2 weights) hears them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.speech.resample import Resampler
from app.speech.whisper_stream import SAMPLE_RATE, StreamingWhisper
from tests.speech import SENTENCES, needs_espeak, spoken, wer


def _speech(tmp_path: Path, text: str) -> np.ndarray:
    """16 kHz float samples of ``text`` spoken by espeak-ng."""
    samples, rate = spoken(tmp_path, text)
    return (Resampler(rate).process(samples.astype(np.float64)) / 32768.0).astype(np.float32)


@pytest.fixture(scope="module")
def recogniser() -> StreamingWhisper:
    return StreamingWhisper(threads=2)


def _two_sentences(tmp_path: Path) -> np.ndarray:
    pause = np.zeros(int(1.2 * SAMPLE_RATE), dtype=np.float32)
    return np.concatenate([_speech(tmp_path, SENTENCES[0]), pause,
                           _speech(tmp_path, SENTENCES[1]), pause])


@needs_espeak
def test_partials_grow_and_each_sentence_becomes_one_final(tmp_path, recogniser) -> None:
    audio = _two_sentences(tmp_path)
    at = (recogniser.start + len(recogniser.buffer)) / SAMPLE_RATE  # the stream's audio so far
    events = []
    chunk = SAMPLE_RATE // 4  # 250 ms frames, as a microphone sends them
    for i in range(0, len(audio), chunk):
        events += recogniser.feed(audio[i:i + chunk])
    events += recogniser.flush()
    finals = [e for e in events if e.kind == "final"]
    assert [e.segment for e in finals] == [0, 1]
    for ref, final in zip(SENTENCES, finals, strict=True):
        assert wer(ref, final.text) <= 0.3, (ref, final.text)
    partials = [e for e in events if e.kind == "partial" and e.segment == 0]
    assert partials, "no partial before the first final"
    assert len(partials[0].text) <= len(finals[0].text)
    # at the pause after each sentence a partial goes out marked as heard at a pause,
    # with the words its final then says (the final takes that decode whole)
    for segment, final in enumerate(finals[:1]):
        paused = [e for e in events if e.kind == "partial" and e.segment == segment
                  and e.pause]
        assert paused and paused[-1].text == final.text, (paused, final.text)
    assert not [e for e in events if e.pause and e.kind != "partial"]
    # each final says where its speech ended in the stream's audio (the VAD's edge, near
    # the end of espeak's speech) and heard at least the endpoint's silence after it
    first_end = at + len(_speech(tmp_path, SENTENCES[0])) / SAMPLE_RATE
    for final in finals:
        t = final.timing
        assert t is not None and t.ended_by in ("silence", "stop")
        assert t.speech_end_s <= t.heard_s <= at + len(audio) / SAMPLE_RATE
        assert 0 <= t.late_s <= t.heard_s - t.speech_end_s
    assert finals[0].timing.ended_by == "silence"
    assert abs(finals[0].timing.speech_end_s - first_end) < 0.5, (finals[0].timing, first_end)
    assert finals[0].timing.heard_s - finals[0].timing.speech_end_s >= \
        recogniser.endpoint_silence_s


@needs_espeak
def test_audio_that_waited_is_cut_at_every_pause_it_holds(tmp_path, recogniser) -> None:
    """A recogniser that fell behind takes all the audio that arrived in one call: each
    pause in it still ends a segment (not one run-on segment up to the length limit)."""
    start = recogniser.segment
    events = recogniser.feed(_two_sentences(tmp_path)) + recogniser.flush()
    finals = [e for e in events if e.kind == "final"]
    assert [e.segment for e in finals] == [start, start + 1]
    for ref, final in zip(SENTENCES, finals, strict=True):
        assert wer(ref, final.text) <= 0.3, (ref, final.text)


def test_silence_is_dropped_and_costs_no_memory(recogniser) -> None:
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    events = []
    for _ in range(120):  # a minute of silence
        events += recogniser.feed(silence)
    assert not [e for e in events if e.text]
    assert len(recogniser.buffer) <= 2 * SAMPLE_RATE
    noise = (np.random.default_rng(0).standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32)
    recogniser.feed(noise[: SAMPLE_RATE // 2])
    assert recogniser.flush() == []  # silence and hiss are never decoded into words


def test_a_missing_or_incomplete_model_folder_is_one_sentence(tmp_path) -> None:
    from app.speech.model_files import SpeechModelError, resolve_asr_model

    with pytest.raises(SpeechModelError, match="not found"):
        resolve_asr_model(tmp_path / "nothing")
    with pytest.raises(SpeechModelError, match="no model.bin"):
        resolve_asr_model(tmp_path)
    (tmp_path / "f.bin").write_bytes(b"x")
    with pytest.raises(SpeechModelError, match="is a file"):
        resolve_asr_model(tmp_path / "f.bin")


@needs_espeak
def test_an_endpoint_is_decided_at_the_first_frame_its_silence_reaches(
        tmp_path, recogniser) -> None:
    """200 ms frames (a browser's, WHIP's): the VAD's full looks come every other frame,
    its look at the buffer's tail at every frame between, so the final is decided at the
    first frame that holds ``endpoint_silence_s`` after the speech's edge (Silero's), never
    a look later."""
    frame = SAMPLE_RATE // 5
    audio = np.concatenate([_speech(tmp_path, SENTENCES[0]),
                            np.zeros(int(1.5 * SAMPLE_RATE), dtype=np.float32)])
    audio = np.concatenate([audio, np.zeros(-len(audio) % frame, dtype=np.float32)])
    recogniser.flush()
    events = []
    for i in range(0, len(audio), frame):
        events += recogniser.feed(audio[i:i + frame])
    (final,) = [e for e in events if e.kind == "final"]
    t = final.timing
    assert t.ended_by == "silence" and wer(SENTENCES[0], final.text) <= 0.3, final.text
    silence = t.heard_s - t.speech_end_s
    assert recogniser.endpoint_silence_s <= silence < recogniser.endpoint_silence_s + 0.2, t
    assert recogniser.flush() == []
