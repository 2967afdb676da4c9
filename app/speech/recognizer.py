"""The speech recogniser seam: what the live audio path needs from a recogniser.

Two levels, each a protocol, and the scheduling hooks between them:

* ``Recognizer``: one speaker's stream. Audio in (``feed``: 16 kHz mono float32 samples),
  ``SpeechEvent``s out: the segment's ``partial`` text so far, and its ``final``;
  ``flush`` when the speaker stops. This is what ``app.speech.service.SpeechRecognition``
  hands the live audio path (``app/live/audio.py``) and what it feeds and flushes, one
  call at a time, on its worker thread. A recogniser that streams on its own (a cloud API,
  a model with its own endpointer) implements this directly; a diarizing recogniser wraps
  one and tells speakers apart in the events it passes on.
* ``ScheduledRecognizer``: a ``Recognizer`` whose decodes the server's one recogniser
  thread schedules decode by decode (``app.speech.service``, ``app.speech.decode_order``):
  ``listen`` (take audio in, no decode), ``due``/``next_decode`` (what its VAD says it
  needs, a ``PlannedDecode``), ``run`` (that decode) and ``partial_share`` (its share of the
  thread for partial decodes, set by the server as speakers come and go). A plain
  ``Recognizer`` is fed whole, one turn at a time, as an urgent turn.
* ``Transcriber`` and ``VoiceDetector``: what the streaming logic of
  ``app.speech.whisper_stream.StreamingWhisper`` (rationed decodes of a growing buffer,
  LocalAgreement-2 partials, endpoints at pauses) needs from a model: one buffer's words
  with their times, and where the buffer holds speech. faster-whisper (Whisper base,
  CTranslate2) and Silero VAD are the first implementations
  (``WhisperTranscriber``, ``SileroVad``); another offline recogniser only needs a
  ``Transcriber`` to get the same streaming behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from app.speech.agreement import Word

__all__ = ["SAMPLE_RATE", "FinalTiming", "PlannedDecode", "Recognizer", "ScheduledRecognizer",
           "SpeechEvent", "SpeechSpan", "Transcriber", "VoiceDetector", "Word"]

SAMPLE_RATE = 16_000  # every recogniser takes 16 kHz mono float32 in [-1, 1]


@dataclass(frozen=True)
class FinalTiming:
    """Where a final's time went before it left the recogniser: the speech-to-screen
    breakdown (API.md: a final caption's ``stats.speech``, made by ``app.live.audio``).

    The stream says where in its audio the speech ended and how much audio it had heard
    when it decided the segment was over; the service (``app.speech.service``) adds when
    the turn carrying that audio was asked for and when the final's decode began and
    ended. Audio positions are seconds of the stream's audio from its first sample; clock
    stamps are ``time.monotonic()``; None: not measured (a recogniser that does not say).
    """

    # what ended the segment: "silence" (an endpoint), "length" (the segment's limit),
    # "stop" (the speaker stopped); None: the recogniser does not say
    ended_by: str | None = None
    speech_end_s: float | None = None  # where the segment's speech ended (the VAD's edge)
    heard_s: float | None = None  # audio heard when the segment was decided to end
    # of the audio heard after the speech, what the endpoint did not need (beyond its
    # silence and one look of the VAD): it arrived while the recogniser was busy
    late_s: float = 0.0
    asked: float | None = None  # the turn carrying that audio went to the recogniser
    began: float | None = None  # the final's decode began (its turn's wait ended)
    ended: float | None = None  # the final's decode ended
    # of asked -> began: the recogniser's thread decoding partials, and decodes finals
    # wait for (anyone's endpoints, pauses, flushes), meanwhile
    behind_partials_s: float = 0.0
    behind_finals_s: float = 0.0


@dataclass(frozen=True)
class SpeechEvent:
    """``partial`` (the segment's text so far) or ``final`` (the segment's last text); a
    final may say where its time went (``timing``), a partial that it was heard at a pause
    (``pause``); neither is part of equality."""

    kind: str
    segment: int
    text: str
    timing: FinalTiming | None = field(default=None, compare=False)
    # a partial decoded at a pause in the speech: what the final will most likely say if
    # the pause lasts (a hint, never part of equality; ``app.translation.pause``)
    pause: bool = field(default=False, compare=False)


@runtime_checkable
class Recognizer(Protocol):
    """One speaker's streaming recogniser (not thread-safe: one call at a time)."""

    segment: int  # the number of the segment in progress (finals so far)

    def feed(self, samples: np.ndarray) -> list[SpeechEvent]:
        """Add audio; returns what it made known (may decode, so off the event loop)."""
        ...

    def flush(self) -> list[SpeechEvent]:
        """The stream ended: the segment in progress becomes a final (if it holds speech)."""
        ...


class PlannedDecode(Protocol):
    """One decode a scheduled stream needs (``StreamingWhisper``'s ``Decode``)."""

    kind: str  # "final" | "long" | "pause" | "partial" for the faster-whisper stream
    end: int  # the buffer's end it hears, in samples (its audio seconds, for metrics)

    @property
    def urgent(self) -> bool:
        """A final waits for it: it goes before other speakers' partials, never thinned."""
        ...

    @property
    def ends_segment(self) -> bool:
        """It ends the segment: the stream may need another decode at once (the buffer
        held another pause), so its turn asks ``next_decode`` again."""
        ...


@runtime_checkable
class ScheduledRecognizer(Recognizer, Protocol):
    """A ``Recognizer`` that lets the server's one recogniser thread choose its decodes.

    ``feed`` is ``listen`` + (while ``next_decode`` says so) ``run``; the server calls the
    three itself instead, so that decodes a final waits for go before anyone's partials
    (``app.speech.decode_order``). Not thread-safe: one call at a time.
    """

    # the share of the recogniser's thread this stream's partial decodes may take; the
    # server splits its partial share between the open streams (``SpeechRecognition``)
    partial_share: float

    def listen(self, samples: np.ndarray) -> None:
        """Add audio without decoding."""
        ...

    def due(self) -> bool:
        """Enough new audio that the VAD should look again (cheap)."""
        ...

    def next_decode(self) -> PlannedDecode | None:
        """The decode the buffer needs now, by its VAD (a few milliseconds), or None."""
        ...

    def run(self, decode: PlannedDecode) -> list[SpeechEvent]:
        """Carry out ``decode`` (from ``next_decode``): the events it made known."""
        ...


# A span of speech in a buffer: {"start": first sample, "end": sample after the last}.
SpeechSpan = dict[str, int]


@runtime_checkable
class Transcriber(Protocol):
    """A recogniser of one buffer: its words with start and end in seconds."""

    def transcribe(self, audio: np.ndarray, language: str) -> list[Word]:
        ...


@runtime_checkable
class VoiceDetector(Protocol):
    """Where a buffer holds speech: spans in sample offsets, in order, separated by
    pauses of at least ``min_silence_s``."""

    def speech(self, audio: np.ndarray, min_silence_s: float) -> list[SpeechSpan]:
        ...
