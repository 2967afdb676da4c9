"""Which language a speaker speaks: Whisper's own detection, limited to the languages the
caller can use.

The realtime translation API takes no source language (OpenAI's model detects it), so a
session that names none asks Whisper once, over its first seconds of speech. Whisper
ranks about a hundred languages; the translator serves a few, so the answer is the most
probable one the caller allows, never a language nothing downstream can translate.
Silence is never guessed at: without enough speech (Silero VAD) the answer is None.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from app.speech.recognizer import SAMPLE_RATE, SpeechEvent

MIN_SPEECH_S = 1.0  # less speech than this is no basis for a guess


def speech_only(audio: np.ndarray) -> np.ndarray:
    """The buffer's speech (Silero VAD spans), silence cut out."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    spans = get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=300,
                                                    speech_pad_ms=100))
    if not spans:
        return audio[:0]
    return np.concatenate([audio[s["start"]:s["end"]] for s in spans])


def detect(model: Any, audio: np.ndarray, allowed: Collection[str]) -> str | None:
    """The most probable language of ``audio`` (16 kHz float32) among ``allowed``, or
    None when it holds too little speech or none of them is heard at all."""
    speech = speech_only(audio)
    if len(speech) < MIN_SPEECH_S * SAMPLE_RATE:
        return None
    _, _, ranked = model.detect_language(audio=speech)
    for lang, probability in sorted(ranked, key=lambda r: -r[1]):
        if lang in allowed and probability > 0.0:
            return str(lang)
    return None


class LanguageProbe:
    """A ``Recognizer`` whose flush is one detection, so that it runs on the recogniser's
    one thread, in turn with every speaker's decodes (``SpeechRecognition``)."""

    segment = 0

    def __init__(self, model: Any, audio: np.ndarray, allowed: Collection[str]) -> None:
        self.model, self.audio, self.allowed = model, audio, allowed

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        return []

    def flush(self) -> list[SpeechEvent]:
        lang = detect(self.model, self.audio, self.allowed)
        return [SpeechEvent("language", 0, lang)] if lang else []
