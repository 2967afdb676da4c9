"""What the routes share: settings, the translation backend, sessions, metrics, readiness.

The backend is held through its seam (``app.translation.backend.BackendService``): its
health, queue positions and detokenizing, never the engine behind it, so the API layer
does not import ``app.engine`` (``tests/test_import_layers.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fastapi import Request

from app.api.errors import APIError, engine_unavailable
from app.api.http.auth import Auth
from app.api.metrics import Metrics
from app.live.limits import LiveLimits, limits_of
from app.live.outputs.flushes import PushFlushes
from app.live.realtime.webrtc import RealtimeCalls
from app.live.services import LiveMetrics, LiveServices
from app.live.whip import WhipSessions
from app.rooms.bus import RoomBus
from app.rooms.bus.local import LocalBus
from app.rooms.registry import RoomRegistry
from app.rooms.transcripts.recorder import TranscriptRecorder
from app.rooms.transcripts.store import TranscriptStore, retention_seconds
from app.rooms.viewer_tokens import RoomViewerTokens
from app.rooms.voice.segments import MemoryVoiceSegments, VoiceSegments
from app.settings import Settings
from app.speech.service import SpeechRecognition
from app.translation.backend import BackendHealth, BackendService
from app.translation.backend_types import IDLE
from app.translation.sessions import SessionStore
from app.translation.translator import Translator
from app.voice.registry import VoiceRegistry, parse_voice_entries


@dataclass
class ServerState:
    settings: Settings
    sessions: SessionStore
    metrics: Metrics = field(default_factory=Metrics)
    model_id: str = "livetrans"
    model_aliases: set[str] = field(default_factory=set)
    # the translation backend (``app.translation.llama_backend.LlamaRunner``); None while
    # the model loads
    backend: BackendService | None = None
    translator: Translator | None = None
    load_error: str | None = None
    auth: Auth = field(default_factory=Auth)
    shutting_down: bool = False
    # monotonic seconds when shutdown began: --shutdown-grace-s counts from there
    shutdown_began: float | None = None
    live_connections: set = field(default_factory=set)
    # ended talks' pushes still delivering (app.live.outputs.flushes): shutdown awaits them
    push_flushes: PushFlushes = field(default_factory=PushFlushes)
    whip: WhipSessions = field(init=False)  # WHIP publishers (app.live.whip)
    # OpenAI realtime translation over WebRTC (app.live.realtime.webrtc)
    realtime_calls: RealtimeCalls = field(init=False)
    # limits for /v1/live other than the settings' (tests); None: the settings' own
    live_limits: LiveLimits | None = None
    rooms: RoomRegistry = field(init=False)
    # ``serve --langs``, or a model written by ``livetrans trim-vocab``, serves only these
    # languages (None: any); langs_given: they came from --langs
    served_langs: frozenset[str] | None = None
    langs_given: bool = False
    # speech in (``"input": "audio"`` on /v1/live); the model loads on the first speaker
    speech: SpeechRecognition = field(init=False)
    # voices (start's "voices" on /v1/live): a synthesizer per language, built on first use
    voices: VoiceRegistry = field(init=False)
    # rooms across replicas (``--room-bus``) and talk transcripts; opened at start-up
    replica: str = "livetrans"
    bus: RoomBus = field(default_factory=LocalBus)
    transcripts: TranscriptStore | None = None
    recorder: TranscriptRecorder | None = None
    # room viewer tokens (printed QR codes); opened at start-up with the store
    viewer_tokens: RoomViewerTokens | None = None
    # room voices' HLS segments, with the bus they were made for (``voice_segments``)
    _voice_segments: tuple[object, VoiceSegments] | None = None

    def __post_init__(self) -> None:
        metrics = self.metrics
        self.rooms = RoomRegistry(
            self.auth.api_keys,
            on_drop=lambda n: metrics.viewer_frames_dropped.inc(n),
            on_viewers=lambda n: metrics.live_viewers.set(n),
        )
        speech = self.settings.speech
        self.speech = SpeechRecognition(speech.model, speech.threads, speech.device,
                                        on_decode=metrics.observe_asr,
                                        max_speakers=speech.max_speakers,
                                        window=speech.window, engine=speech.engine)
        self.whip = WhipSessions(on_dropped=metrics.asr_dropped_seconds.inc)
        self.realtime_calls = RealtimeCalls(self.settings.live.max_sessions)
        self.voices = VoiceRegistry(parse_voice_entries(self.settings.voice.voices),
                                    self.settings.voice.engine, self.settings.voice.threads,
                                    metrics=metrics.voice_metrics())

    def live_services(self) -> LiveServices:
        """What the live subsystem (``app.live``) may use of this state, for one socket
        (built when the route admits it: the bus, the recorder and the limits in force
        then). The engine, readiness and shutdown are read when called."""
        metrics = self.metrics
        return LiveServices(
            settings=self.settings, limits=limits_of(self), sessions=self.sessions,
            speech=self.speech, rooms=self.rooms, connections=self.live_connections,
            translate=lambda *args, **kwargs: self.translator.translate(*args, **kwargs),
            next_seq=lambda: self.backend.next_seq(),
            overload=lambda: self.backend.overload() if self.backend is not None else None,
            detokenize=lambda ids: self.backend.detokenize(ids),
            token_bytes=lambda token: self.backend.token_bytes(token),
            ready=lambda: self.ready, shutting_down=lambda: self.shutting_down,
            unserved=self.unserved, bus=self.bus, recorder=self.recorder,
            room_tokens=self.viewer_tokens,
            replica=self.replica, flushes=self.push_flushes, voices=self.voices,
            voice_segments=self.voice_segments(),
            metrics=LiveMetrics(
                caption_seconds=metrics.caption_seconds.observe,
                generation=lambda result: metrics.observe_generation(result, route="live"),
                verdict=metrics.observe_verdict,
                audio_dropped=metrics.asr_dropped_seconds.inc,
                refused_busy=lambda: metrics.admission_refusals.labels("live_busy").inc(),
                output=metrics.observe_output),
        )

    def voice_segments(self) -> VoiceSegments:
        """Where room voices' segments live: on the room bus's Redis, so every replica
        serves them, else in this process (made once per bus)."""
        client = getattr(self.bus, "binary_redis", None)
        made = self._voice_segments
        if made is not None and made[0] is self.bus:
            return made[1]
        store: VoiceSegments
        if client is not None:
            from app.rooms.voice.redis_segments import RedisVoiceSegments

            store = RedisVoiceSegments(
                client, getattr(self.bus, "prefix", "livetrans"),
                retention_seconds(self.settings.rooms.transcript_retention_days))
        else:
            store = MemoryVoiceSegments()
        self._voice_segments = (self.bus, store)
        return store

    def begin_shutdown(self) -> None:
        """Stop taking work; live connections flush their finals, say 'done' and close."""
        self.stop_taking_work()
        for conn in list(self.live_connections):
            conn.begin_shutdown()
        self.realtime_calls.disconnect_idle()

    def stop_taking_work(self) -> None:
        """Shutdown began (the first call counts): no new work; the grace starts now."""
        self.shutting_down = True
        if self.shutdown_began is None:
            self.shutdown_began = time.monotonic()

    def grace_left(self) -> float:
        """Seconds left of ``--shutdown-grace-s`` since shutdown began (all of it before)."""
        grace = self.settings.scheduling.shutdown_grace_s
        if self.shutdown_began is None:
            return grace
        return max(0.0, self.shutdown_began + grace - time.monotonic())

    @property
    def ready(self) -> bool:
        return self.translator is not None and not self.shutting_down

    def require_ready(self) -> None:
        """503 while the model loads or the server shuts down (the caller may retry), and
        while the engine cannot run generations (its scheduler thread is broken)."""
        if self.shutting_down:
            raise APIError(503, "Server is shutting down.", code="shutting_down")
        broken = self.backend_health().broken
        if broken is not None:
            raise engine_unavailable(broken)
        if self.translator is None:
            reason = self.load_error or "the model is still loading"
            raise APIError(503, f"Not ready: {reason}.", code="not_ready",
                           headers={"Retry-After": "2"})


    def backend_health(self) -> BackendHealth:
        """The backend's queue depth and whether it can run jobs (idle while it loads)."""
        return self.backend.health() if self.backend is not None else IDLE

    def unserved(self, langs: dict[str, str]) -> tuple[str, str] | None:
        """The first ``(param, lang)`` of ``langs`` (param -> language) that this server
        does not serve (``--langs``, or the languages its model was trimmed for), with the
        sentence that says so; None when every one is served. A trimmed model spells
        another language's text in bytes: slow and poor, so it is refused rather than
        translated badly."""
        if self.served_langs is None:
            return None
        for param, lang in langs.items():
            if lang not in self.served_langs:
                kept = ", ".join(sorted(self.served_langs))
                if self.langs_given:
                    return param, (f"This server serves {kept} (serve --langs); '{lang}' "
                                   f"is not among them. Start it with {lang} in --langs.")
                return param, (f"This server's model was trimmed to {kept} (livetrans "
                               f"trim-vocab); '{lang}' is not among them. Serve a model "
                               f"trimmed for {lang}, or the full model.")
        return None


def get_state(request: Request) -> ServerState:
    return request.app.state.livetrans
