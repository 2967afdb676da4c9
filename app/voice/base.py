"""The synthesizer seam, beside the recogniser's: text in one language in, PCM16 out.

An engine (Piper, espeak-ng, Kokoro) implements ``Synthesizer``; ``synthesize`` blocks (it
runs a model or a process) and is always called off the event loop and off the engine's
thread. Everything above this seam (a connection's voice, a room's voice, the realtime
translation API's audio deltas) sees only this protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class VoiceInfo:
    """What a voice is, for ``ready`` frames, the operator page and logs (never user
    text)."""

    lang: str
    engine: str  # "piper", "espeak-ng", "kokoro"
    voice: str  # the voice's name within its engine
    sample_rate: int  # Hz of the PCM16 mono it returns


class Synthesizer(Protocol):
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
