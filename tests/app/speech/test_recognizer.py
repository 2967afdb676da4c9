"""The recogniser seam (``app.speech.recognizer``): a transcriber and a voice detector that
are no Whisper drive the streaming recogniser's logic (partials that grow, one final per
pause, the buffer cut at each), and the stream is a ``Recognizer`` the service feeds.

The fakes are test doubles for the model (a "word" per half second of tone, speech wherever
the signal is loud): they test the seam, not a user path; Whisper on real speech is
``test_whisper_stream.py``.
"""

from __future__ import annotations

import asyncio

import numpy as np

from app.speech.agreement import Word
from app.speech.recognizer import (
    SAMPLE_RATE,
    Recognizer,
    SpeechSpan,
    Transcriber,
    VoiceDetector,
)
from app.speech.service import SpeechRecognition
from app.speech.whisper_stream import SileroVad, StreamingWhisper, WhisperTranscriber

# the words each loudness "says", one per half second
SENTENCES = {0.5: ["good", "morning", "every", "one"], 0.3: ["the", "talk", "starts", "now"]}


class LoudnessVad:
    """Speech wherever a 10 ms frame is loud; spans closer than ``min_silence_s`` merge."""

    def speech(self, audio: np.ndarray, min_silence_s: float) -> list[SpeechSpan]:
        frame = SAMPLE_RATE // 100
        loud = [bool(np.abs(audio[i:i + frame]).max() > 0.1)
                for i in range(0, len(audio) - frame + 1, frame)]
        spans: list[SpeechSpan] = []
        for i, on in enumerate(loud):
            if not on:
                continue
            start, end = i * frame, (i + 1) * frame
            if spans and start - spans[-1]["end"] < min_silence_s * SAMPLE_RATE:
                spans[-1]["end"] = end
            else:
                spans.append({"start": start, "end": end})
        return spans


class ToneTranscriber:
    """The loudness of the buffer picks the sentence; each half second of it, one word."""

    def __init__(self) -> None:
        self.calls = 0

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        self.calls += 1
        loud = np.abs(audio)[np.abs(audio) > 0.1]
        if not len(loud):
            return []
        words = SENTENCES[round(float(loud.max()), 1)]
        n = min(len(words), int(len(loud) / (SAMPLE_RATE / 2)))
        return [Word(" " + w, k * 0.5, k * 0.5 + 0.4) for k, w in enumerate(words[:n])]


def _talk() -> np.ndarray:
    pause = np.zeros(int(1.2 * SAMPLE_RATE), dtype=np.float32)
    return np.concatenate([np.full(2 * SAMPLE_RATE, 0.5, dtype=np.float32), pause,
                           np.full(2 * SAMPLE_RATE, 0.3, dtype=np.float32), pause])


def _stream() -> StreamingWhisper:
    return StreamingWhisper(transcriber=ToneTranscriber(), vad=LoudnessVad())


def test_the_fakes_and_the_faster_whisper_parts_satisfy_the_protocols() -> None:
    assert isinstance(ToneTranscriber(), Transcriber) and isinstance(LoudnessVad(), VoiceDetector)
    assert isinstance(WhisperTranscriber(model=None), Transcriber)
    assert isinstance(SileroVad(), VoiceDetector)
    assert isinstance(_stream(), Recognizer)


def test_a_transcriber_drives_partials_and_one_final_per_pause() -> None:
    stream = _stream()
    audio = _talk()
    events = []
    chunk = SAMPLE_RATE // 4  # 250 ms frames, as a microphone sends them
    for i in range(0, len(audio), chunk):
        events += stream.feed(audio[i:i + chunk])
    events += stream.flush()
    finals = [e for e in events if e.kind == "final"]
    assert [(e.segment, e.text) for e in finals] == [(0, "good morning every one"),
                                                      (1, "the talk starts now")]
    partials = [e.text for e in events if e.kind == "partial" and e.segment == 0]
    assert partials and all("good morning every one".startswith(p) for p in partials)


def test_a_partial_that_heard_the_pause_goes_out_again_as_the_pause_without_a_decode() -> None:
    """A partial decoded just before the silence reached ``END_PAD_S`` (as happens when
    decodes are slow or the recogniser looks late) already heard what the pause decode
    would: the pause partial still goes out, with the final's words, and costs no decode."""
    stream = _stream()
    transcriber = stream.transcriber
    speech = np.full(2 * SAMPLE_RATE, 0.5, dtype=np.float32)
    quarter = np.zeros(SAMPLE_RATE // 4, dtype=np.float32)
    first = stream.feed(np.concatenate([speech, quarter]))  # 0.25 s of silence: a partial
    assert [(e.kind, e.pause) for e in first] == [("partial", False)]
    calls = transcriber.calls
    paused = stream.feed(quarter)  # 0.5 s: past the pause's pad, the decode heard it
    assert [(e.kind, e.pause, e.text) for e in paused] == [
        ("partial", True, "good morning every one")]
    assert transcriber.calls == calls
    final = stream.feed(quarter) + stream.feed(quarter)  # the endpoint's silence
    assert [(e.kind, e.text) for e in final] == [("final", "good morning every one")]
    assert transcriber.calls == calls
    assert not stream.feed(quarter)  # silence after the final: no second pause


def test_audio_that_waited_is_cut_at_every_pause_it_holds() -> None:
    stream = _stream()
    events = stream.feed(_talk()) + stream.flush()
    assert [(e.segment, e.text) for e in events if e.kind == "final"] == [
        (0, "good morning every one"), (1, "the talk starts now")]


def test_the_service_feeds_any_recognizer() -> None:
    class Echo:
        segment = 0

        def feed(self, samples: np.ndarray):  # noqa: ANN202
            return []

        def flush(self):  # noqa: ANN202
            from app.speech.recognizer import SpeechEvent

            return [SpeechEvent("final", self.segment, "hello")]

    speech = SpeechRecognition()
    try:
        async def talk():  # noqa: ANN202
            await speech.feed(Echo(), np.zeros(SAMPLE_RATE, dtype=np.float32))
            return await speech.flush(Echo())

        assert [e.text for e in asyncio.run(talk())] == ["hello"]
    finally:
        speech.close()
