"""The recogniser seam's configuration (``app.speech.engines``) and its scheduling hooks
(``app.speech.recognizer.ScheduledRecognizer``): the speech service opens streams of the
engine it is configured with, schedules a ``ScheduledRecognizer`` decode by decode, and
feeds any other ``Recognizer`` whole.

The echo recogniser is a test double for a model (a final per fed chunk, its length as the
text): it tests the seam's wiring, not recognition; Whisper on real speech is
``test_whisper_stream.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import numpy as np
import pytest

from app.speech import engines
from app.speech.engines import RecognizerEngine, RecognizerOptions, engine_named
from app.speech.language_id import LanguageProbe
from app.speech.recognizer import Recognizer, ScheduledRecognizer, SpeechEvent
from app.speech.service import SpeechRecognition
from app.speech.whisper_stream import StreamingWhisper
from tests.app.speech.test_recognizer import LoudnessVad, ToneTranscriber


class EchoRecognizer:
    """A plain ``Recognizer`` (no scheduling hooks): each ``feed`` is a final saying how
    many samples it got; ``flush`` says ``end``."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.segment = 0
        self.fed: list[int] = []

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        self.fed.append(len(samples))
        self.segment += 1
        return [SpeechEvent("final", self.segment - 1, f"{self.language}:{len(samples)}")]

    def flush(self) -> list[SpeechEvent]:
        return [SpeechEvent("final", self.segment, "end")]


def _echo_engine(probe: Any = None) -> RecognizerEngine:
    return RecognizerEngine(name="echo", missing=lambda: None, load=lambda _o: "model",
                            open=lambda _model, language, _o: EchoRecognizer(language),
                            probe=probe)


def test_whisper_is_the_default_and_an_unknown_engine_is_refused_by_name() -> None:
    assert SpeechRecognition().engine is engine_named("whisper")
    with pytest.raises(ValueError, match="unknown speech recogniser 'nope': one of .*whisper"):
        SpeechRecognition(engine="nope")


def test_the_configured_engine_opens_the_streams_and_a_plain_one_is_fed_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(engines.ENGINES, "echo", _echo_engine())
    speech = SpeechRecognition(engine="echo", max_speakers=2, threads=3, window="full")
    assert speech.options == RecognizerOptions(None, 3, "auto", "full")

    async def main() -> tuple[EchoRecognizer, list[SpeechEvent], list[SpeechEvent]]:
        stream = await speech.open_stream("de")
        heard = await speech.feed(stream, np.zeros(1600, dtype=np.float32))
        return stream, heard, await speech.flush(stream)

    try:
        stream, heard, flushed = asyncio.run(main())
    finally:
        speech.close()
    assert isinstance(stream, EchoRecognizer) and isinstance(stream, Recognizer)
    assert not isinstance(stream, ScheduledRecognizer)
    assert stream.fed == [1600]  # one turn, whole
    assert [e.text for e in heard] == ["de:1600"] and [e.text for e in flushed] == ["end"]


def test_an_engine_without_a_language_probe_hears_no_language(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(engines.ENGINES, "echo", _echo_engine())
    speech = SpeechRecognition(engine="echo")
    try:
        assert asyncio.run(speech.detect_language(np.zeros(16000, np.float32), ["en"])) is None
    finally:
        speech.close()


def test_a_probe_runs_as_one_turn_of_the_configured_engine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def probe(model: Any, audio: np.ndarray, allowed: Collection[str]) -> EchoRecognizer:
        assert model == "model" and list(allowed) == ["fr", "en"]
        return EchoRecognizer("fr")

    monkeypatch.setitem(engines.ENGINES, "echo", _echo_engine(probe))
    speech = SpeechRecognition(engine="echo")
    try:
        heard = asyncio.run(speech.detect_language(np.zeros(16000, np.float32), ["fr", "en"]))
    finally:
        speech.close()
    assert heard == "end"  # the probe's flush: its one event's text is the language


def test_the_faster_whisper_stream_has_the_scheduling_hooks_and_the_probe_has_none() -> None:
    stream = StreamingWhisper(transcriber=ToneTranscriber(), vad=LoudnessVad())
    assert isinstance(stream, ScheduledRecognizer)
    probe = LanguageProbe(None, np.zeros(0, np.float32), ["en"])
    assert isinstance(probe, Recognizer) and not isinstance(probe, ScheduledRecognizer)


def test_whisper_on_a_gpu_lends_the_translation_engine_no_cores() -> None:
    from types import SimpleNamespace

    whisper = engine_named("whisper")
    assert whisper.on_cpu(SimpleNamespace(model=SimpleNamespace(device="cpu")))
    assert not whisper.on_cpu(SimpleNamespace(model=SimpleNamespace(device="cuda")))
