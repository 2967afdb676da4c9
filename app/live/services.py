"""What the live subsystem uses of the server: a small services object, not the server state.

The API layer builds a ``LiveServices`` for each socket it admits (``ServerState.live_services``
in ``app.api.state``), so nothing in ``app.live`` reads the server's state or imports
``app.api``. Plain values are what stays put while a connection runs (settings, limits, the
session store, the recogniser, the rooms, the bus and the recorder); what changes under
it (the model loading, shutdown) is read through callables, and metrics are plain
callables too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from app.live.limits import LiveLimits
from app.live.outputs.flushes import PushFlushes
from app.rooms.bus import RoomBus
from app.rooms.registry import RoomRegistry
from app.rooms.talk import Talk
from app.rooms.transcripts.recorder import TranscriptRecorder
from app.rooms.viewer_tokens import RoomViewerTokens
from app.rooms.voice.segments import VoiceSegments
from app.settings import Settings
from app.speech.service import SpeechRecognition
from app.translation.backend import GenerationResult
from app.translation.sessions import SessionStore
from app.translation.translator import TranslationOutcome
from app.voice.registry import VoiceRegistry


def _ignore(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class LiveMetrics:
    """What the live subsystem counts; each a plain callable (no-ops by default)."""

    caption_seconds: Callable[[float], None] = _ignore  # a final's update -> caption
    generation: Callable[[GenerationResult], None] = _ignore  # every live generation
    verdict: Callable[[TranslationOutcome], None] = _ignore  # its pathology verdict
    audio_dropped: Callable[[float], None] = _ignore  # seconds of audio dropped (overrun)
    refused_busy: Callable[[], None] = _ignore  # a speaker refused by admission control
    # a push's event: (output type, "queued" | "delivered" | "failed" | "dropped" |
    # "retries", seconds from caption to delivery) (``app.live.outputs.delivery``)
    output: Callable[[str, str, float], None] = _ignore


@dataclass(frozen=True)
class LiveServices:
    settings: Settings
    limits: LiveLimits
    sessions: SessionStore
    speech: SpeechRecognition
    rooms: RoomRegistry
    # the open speakers' connections, shared with the server (shutdown tells each one)
    connections: set[Any]
    # the engine, read when called (the model loads after the server starts)
    translate: Callable[..., Awaitable[TranslationOutcome]]
    next_seq: Callable[[], int]  # the engine queue's next position
    overload: Callable[[], str | None]  # why the engine cannot take another speaker
    detokenize: Callable[[list[int]], str]
    ready: Callable[[], bool]  # the model is loaded and the server is not shutting down
    shutting_down: Callable[[], bool]
    # the first (param, sentence) of the languages the model does not serve, or None
    unserved: Callable[[dict[str, str]], tuple[str, str] | None]
    bus: RoomBus | None = None
    # one token's bytes (append-only text: ``app.translation.commit_policy`` cuts at words)
    token_bytes: Callable[[int], bytes] | None = None
    recorder: TranscriptRecorder | None = None
    replica: str = "livetrans"
    # room viewer tokens: a viewer's token may admit to every talk of its room
    room_tokens: RoomViewerTokens | None = None
    metrics: LiveMetrics = field(default_factory=LiveMetrics)
    # the server's voices (start's "voices"); None: no voice for any language
    voices: VoiceRegistry | None = None
    # ended talks' pushes still delivering: the server's shutdown waits for them
    flushes: PushFlushes = field(default_factory=PushFlushes)
    # where a room's voices go as HLS audio segments (``app.rooms.voice``); None: nowhere
    voice_segments: VoiceSegments | None = None

    def talk(self, owner: object) -> Talk:
        """A speaker's talk in a room (``app.rooms.talk``), not yet open."""
        return Talk(self.rooms, owner, bus=self.bus, recorder=self.recorder,
                    replica=self.replica)
