"""The synthesizer seam, beside the recogniser's: text in one language in, PCM16 out.

An engine (Piper, espeak-ng, Kokoro) implements ``Synthesizer``; ``synthesize`` blocks (it
runs a model or a process) and is always called off the event loop and off the engine's
thread. Everything above this seam (a connection's voice, a room's voice, the realtime
translation API's audio deltas) sees only this protocol. Engines are registered by name
and chosen by configuration (``app.voice.engines``, ``--voice-engine``), as recognisers
are (``app.speech.engines``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

# Speeds an engine accepts: the catch-up policy only ever asks for 1.0 or more, and
# past 2x speech stops being intelligible, so every engine clamps to this range.
MIN_SPEED, MAX_SPEED = 0.5, 2.0
SAMPLE_WIDTH = 2  # bytes per PCM16 sample; every voice is mono


@dataclass(frozen=True)
class VoiceInfo:
    """What a voice is, for ``ready`` frames, the operator page and logs (never user
    text)."""

    lang: str
    engine: str  # "piper", "espeak-ng", "kokoro"
    voice: str  # the voice's name within its engine
    sample_rate: int  # Hz of the PCM16 mono it returns


@runtime_checkable
class Synthesizer(Protocol):
    """One language's voice, shared by every stream of that language (``VoiceRegistry``).

    ``info`` says what it is (and the sample rate of what it returns); ``synthesize``
    speaks one committed phrase. ``VoiceStream`` (``app.voice.stream``) calls it on the
    registry's executor, one phrase of a stream at a time, with a speed above 1.0 when
    the voice fell behind the speaker (``app.voice.catchup``); it must be safe to call
    from the executor's threads.
    """

    info: VoiceInfo

    def synthesize(self, text: str, speed: float = 1.0) -> bytes:
        """``text`` spoken as little-endian PCM16 mono at ``info.sample_rate``. ``speed``
        above 1.0 speaks faster (a voice that fell behind the speaker catches up), within
        the engine's bounds. Blocking; raises ``SynthesisError`` (one line) on failure."""
        ...


class SynthesisError(RuntimeError):
    """An engine could not speak a text (its process failed, its model is missing)."""


class VoiceUnavailable(LookupError):
    """No engine on this server speaks a language (``voice_unavailable``)."""


def clamp_speed(speed: float) -> float:
    """``speed`` within [MIN_SPEED, MAX_SPEED] (NaN is 1.0): an engine's bound, so a
    policy's arithmetic can never ask a model for nonsense."""
    if not speed == speed:  # NaN
        return 1.0
    return min(MAX_SPEED, max(MIN_SPEED, float(speed)))


def duration_s(pcm: bytes, sample_rate: int) -> float:
    """Seconds of PCM16 mono audio."""
    return len(pcm) / (SAMPLE_WIDTH * sample_rate)
