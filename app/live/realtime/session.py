"""One realtime translation session: the protocol's state machine over live legs.

Two tasks. The reader (``run``) reads the client's events, refuses bad ones with an
``error`` event (the session goes on), applies ``session.update`` at once and queues
audio, language changes and ``session.close`` in order for the driver. The driver
(``drive``) feeds the 200 ms frames to the current leg (``legs.Leg``: an ordinary
``/v1/live`` audio connection), starts a new leg when the languages change, detects the
source language with Whisper when the client set none, and on ``session.close`` finishes
the leg, so what was said is translated before ``session.closed``.

What a leg says back becomes deltas: the segment's committed text (``commit`` frames of
``"display": "append"``, ``app.translation.commit_policy``) as output transcript deltas,
and the final's recognised source as an input transcript delta when transcription is
on. Both streams are append-only (``transcripts``). Queues are bounded: audio beyond
``MAX_QUEUED_FRAMES`` is dropped with one ``audio_overrun`` error per episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from app.live.frames import encode_frame, log_unexpected
from app.live.realtime import events
from app.live.realtime.audio_buffer import SAMPLE_RATE, FrameBuffer, decode_audio
from app.live.realtime.client_events import (
    Append,
    ClientEventError,
    Close,
    Update,
    parse_client_event,
)
from app.live.realtime.legs import Leg
from app.live.realtime.session_state import SessionConfig, language_checker
from app.live.realtime.transcripts import TranscriptStream
from app.live.realtime.voice_out import AudioSink, VoiceOut, VoiceSource
from app.live.services import LiveServices
from app.speech.resample import Resampler
from app.translation.prompts import LANGUAGE_NAMES

log = logging.getLogger("livetrans.realtime")

MAX_QUEUED_FRAMES = 150  # 30 s of audio waiting for the driver
MAX_COMMANDS = MAX_QUEUED_FRAMES + 50  # ... and language changes between them
DETECT_AFTER_FRAMES = 15  # 3 s of audio before Whisper is asked the source language
DETECT_MAX_FRAMES = 50  # without speech by 10 s, the silence held is dropped
# a leg refused for capacity ends the session (with its error event first)
FATAL_REFUSALS = {"too_many_connections", "not_ready", "busy", "server_busy",
                  "speech_unavailable"}
CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_INTERNAL, CLOSE_TRY_AGAIN = 1000, 1001, 1011, 1013


class ClientGone(Exception):
    """A send to the client failed: it left (or the socket closed)."""


Send = Callable[[str], Awaitable[None]]
# a language's voice stream (told of what it will not speak), or None: no voice for it
Voices = Callable[[str, Callable[[Any], None]], Awaitable[VoiceSource | None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


class RealtimeSession:
    def __init__(self, config: SessionConfig, services: LiveServices, owner: str | None,
                 send: Send, voices: Voices | None = None,
                 sink: AudioSink | None = None) -> None:
        self.config = config
        self.sink = sink  # WebRTC: the speech track (else audio delta events)
        self.services = services
        self.owner = owner
        self._send = send
        self.voices = voices  # the output language's voice, when the server has voices
        self.voice_outs: dict[int, VoiceOut] = {}  # per leg (id)
        self.voiceless_told: set[str] = set()
        self._tells: set[asyncio.Task] = set()  # error events from callbacks
        self.send_lock = asyncio.Lock()
        self.buffer = FrameBuffer()
        self.commands: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.queued_frames = 0
        self.overrun = False
        self.closing = False
        self.leg: Leg | None = None
        self.detected: str | None = None
        self.held: list[bytes] = []  # frames waiting for the source language
        self.output_texts: dict[int, TranscriptStream] = {}  # per leg (id)
        self.input_texts: dict[int, TranscriptStream] = {}
        self.missing_language_told = False
        self.closed_sent = False
        self._ending: asyncio.Task | None = None  # telling the client of a shutdown
        # set when a leg was refused for capacity: the session ends with this close code
        self.failed: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    # -- sending ----------------------------------------------------------------------
    async def send(self, event: dict[str, Any]) -> None:
        """One event to the client; nothing follows ``session.closed`` (a client event
        read while it was being sent is left unanswered: the session is over)."""
        async with self.send_lock:
            if self.closed_sent:
                return
            self.closed_sent = event["type"] == "session.closed"
            try:
                await self._send(encode_frame(event))
            except Exception as exc:  # noqa: BLE001 - every send failure means the same
                raise ClientGone(type(exc).__name__) from exc

    async def error(self, exc: ClientEventError) -> None:
        await self.send(events.error_event(exc.code, exc.message, param=exc.param,
                                           client_event_id=exc.event_id))

    # -- languages --------------------------------------------------------------------
    def check_language(self, code: str, param: str) -> str:
        """A language this server translates, normalised, or ``ClientEventError``."""
        return language_checker(self.services.unserved)(code, param)

    def default_source(self) -> str:
        """The source language when Whisper cannot tell: English, if served."""
        served = self.served_languages()
        return "en" if "en" in served or not served else served[0]

    def served_languages(self) -> list[str]:
        return [lang for lang in LANGUAGE_NAMES
                if not self.services.unserved({"source_lang": lang})]

    # -- the reader -------------------------------------------------------------------
    async def run(self, receive: Receive) -> int:
        """Read events until the client leaves or the session ends; the close code."""
        await self.send(events.session_event("session.created", self.config.to_json()))
        driver = asyncio.create_task(self.drive())
        try:
            while not driver.done():
                receive_task = asyncio.create_task(receive())
                timeout = (None if self.closing
                           else max(0.0, self.config.expires_at - time.time()))
                done, _ = await asyncio.wait({receive_task, driver, self.failed},
                                             timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if self.failed.done():
                    receive_task.cancel()
                    return self.failed.result()
                if not done:
                    receive_task.cancel()
                    await self.send(events.error_event(
                        "session_expired", "the session reached its expires_at; what was "
                        "said is translated, then it closes", kind="invalid_request_error"))
                    self.queue_close()
                    continue
                if receive_task not in done:
                    receive_task.cancel()
                    break
                message = receive_task.result()
                if message["type"] == "websocket.disconnect":
                    return CLOSE_GOING_AWAY
                await self.handle(message)
            crash = driver.exception()
            if crash is not None:
                raise crash
            return driver.result()
        except ClientGone:
            return CLOSE_GOING_AWAY
        except Exception as exc:  # noqa: BLE001 - a bug: logged, told, the socket closed
            log_unexpected(log, exc, "realtime session")
            with contextlib.suppress(ClientGone):
                await self.send(events.error_event("internal_error", "Internal server "
                                                   "error.", kind="server_error"))
            return CLOSE_INTERNAL
        finally:
            if not driver.done():
                driver.cancel()
                with contextlib.suppress(BaseException):
                    await driver
            self.abandon_leg()

    async def handle(self, message: dict[str, Any]) -> None:
        """One client message; a bad one is answered by an error event, never fatal."""
        event: Update | Append | Close | None = None
        try:
            if message.get("bytes") is not None:
                raise ClientEventError("invalid_event", "binary frames are not events: send "
                                       "JSON text, audio base64 in "
                                       "session.input_audio_buffer.append")
            event = parse_client_event(message.get("text") or "")
            if self.closing:
                raise ClientEventError("session_closing", "session.close was received; "
                                       "no more events", event_id=event.event_id)
            if isinstance(event, Update):
                if self.commands.qsize() >= MAX_COMMANDS:
                    raise ClientEventError("session_busy", "too many events wait for the "
                                           "session; send updates less often",
                                           event_id=event.event_id)
                self.config = self.config.updated(event.session, event.fields_set,
                                                  self.check_language, event.event_id)
                self.commands.put_nowait(("config", self.config))
                await self.send(events.session_event("session.updated",
                                                     self.config.to_json()))
            elif isinstance(event, Append):
                await self.append(decode_audio(event.audio, event.event_id))
            elif isinstance(event, Close):
                self.queue_close()
        except ClientEventError as exc:
            if exc.event_id is None and event is not None:
                exc.event_id = event.event_id
            await self.error(exc)
        except ClientGone:
            raise
        except Exception as exc:  # noqa: BLE001 - one event's bug, not the session's
            log_unexpected(log, exc, "realtime event")
            await self.send(events.error_event(
                "internal_error", "Internal server error.", kind="server_error",
                client_event_id=event.event_id if event is not None else None))

    async def append(self, pcm: bytes) -> None:
        for frame in self.buffer.add(pcm):
            if self.queued_frames >= MAX_QUEUED_FRAMES:
                if not self.overrun:
                    self.overrun = True
                    await self.send(events.error_event(
                        "audio_overrun", "audio arrives faster than it is recognised: "
                        "frames are dropped until the backlog shrinks (send audio in real "
                        "time)", kind="server_error"))
                continue
            self.overrun = False
            self.queued_frames += 1
            self.commands.put_nowait(("audio", frame))

    def queue_close(self) -> None:
        if not self.closing:
            self.closing = True
            rest = self.buffer.rest()
            if rest:
                self.queued_frames += 1
                self.commands.put_nowait(("audio", rest))
            self.commands.put_nowait(("close", None))

    # -- the driver -------------------------------------------------------------------
    async def drive(self) -> int:
        """Audio to legs in order; on close, finish the leg and say ``session.closed``."""
        config = self.config
        while True:
            kind, value = await self.commands.get()
            if kind == "config":
                config = value
                if self.leg is not None and not self._fits(self.leg, config):
                    await self.finish_leg()
            elif kind == "audio":
                self.queued_frames -= 1
                await self.feed(config, value)
            else:
                if self.held and config.output_language is not None:
                    # under 3 s held for detection: ask now; too little speech to tell
                    # is said in the default language (the leg's VAD skips silence)
                    source = (self._source(config) or await self.detect()
                              or self.default_source())
                    await self.start_leg(config, source)
                await self.finish_leg()
                await self.send(events.closed_event())
                return CLOSE_NORMAL

    def _source(self, config: SessionConfig) -> str | None:
        return config.source_language or self.detected

    def _fits(self, leg: Leg, config: SessionConfig) -> bool:
        return (leg.output_language == config.output_language
                and leg.source_language == self._source(config))

    async def feed(self, config: SessionConfig, frame: bytes) -> None:
        if config.output_language is None:
            if not self.missing_language_told:
                self.missing_language_told = True
                await self.send(events.error_event(
                    "output_language_required", "set session.audio.output.language with "
                    "session.update before appending audio; this audio was not translated",
                    param="session.audio.output.language"))
            return
        if self.leg is not None and self._fits(self.leg, config) and not self.leg.task.done():
            await self.leg.push(frame)
            return
        if self._source(config) is None:
            self.held.append(frame)
            if len(self.held) < DETECT_AFTER_FRAMES or len(self.held) % 5:
                return
            self.detected = await self.detect()
            if self.detected is None:
                if len(self.held) >= DETECT_MAX_FRAMES:
                    self.held = self.held[-5:]  # silence: keep the last second
                return
        await self.start_leg(config, self._source(config) or self.default_source())

    async def detect(self) -> str | None:
        pcm = np.frombuffer(b"".join(self.held), dtype="<i2").astype(np.float64)
        audio = (Resampler(SAMPLE_RATE).process(pcm) / 32768.0).astype(np.float32)
        try:
            return await self.services.speech.detect_language(audio,
                                                              self.served_languages())
        except Exception as exc:  # noqa: BLE001 - no guess; the default source is used
            log_unexpected(log, exc, "language detection")
            await self.send(events.error_event(
                "language_detection_failed", "the source language could not be detected; "
                "the default is assumed (set session.livetrans.source_language)",
                kind="server_error"))
            return self.default_source()

    async def start_leg(self, config: SessionConfig, source: str) -> None:
        await self.finish_leg()
        assert config.output_language is not None
        leg = Leg(self.services, self.owner, config.output_language, source,
                  {"display": "append"},
                  self.on_leg_frame, SAMPLE_RATE)
        self.leg = leg
        leg.task.add_done_callback(lambda _task: self._leg_ended(leg))
        self.output_texts[id(leg)] = TranscriptStream(config.output_language)
        self.input_texts[id(leg)] = TranscriptStream(source)
        await self.open_voice(leg)
        held, self.held = self.held, []
        for frame in held:
            await leg.push(frame)

    async def open_voice(self, leg: Leg) -> None:
        """The output language's voice for ``leg``; a language no voice speaks is told
        once (``voice_unavailable``) and its text goes on."""
        if self.voices is None:
            return
        lang = leg.output_language
        voice = await self.voices(lang, self.voice_lost)
        if voice is None:
            if lang not in self.voiceless_told:
                self.voiceless_told.add(lang)
                await self.send(events.error_event(
                    "voice_unavailable", f"no voice on this server speaks '{lang}': its "
                    "translation comes as text only", param="session.audio.output.language",
                    kind="server_error"))
            return
        self.voice_outs[id(leg)] = VoiceOut(voice, self.send, lambda: self.buffer.elapsed_ms,
                                           self.sink)

    def voice_lost(self, loss: Any) -> None:
        """Committed text a voice will not speak (it fell behind, failed, or the talk
        ended first): told as an error event, never lost silently."""
        async def tell() -> None:
            with contextlib.suppress(ClientGone):
                await self.send(events.error_event(
                    "voice_dropped", f"{loss.phrases} phrase(s) of the translation were not "
                    f"spoken ({loss.reason})", kind="server_error"))

        task = asyncio.get_running_loop().create_task(tell())
        self._tells.add(task)
        task.add_done_callback(self._tells.discard)

    async def finish_leg(self) -> None:
        leg, self.leg = self.leg, None
        if leg is None:
            return
        await leg.finish()
        voice = self.voice_outs.pop(id(leg), None)
        if voice is not None:
            await voice.finish()  # what was committed is heard before what follows
        self._settle(leg)

    def abandon_leg(self) -> None:
        """The client left: the leg's connection ends as for a vanished speaker."""
        leg, self.leg = self.leg, None
        if leg is not None:
            leg.socket.disconnect()
            voice = self.voice_outs.pop(id(leg), None)
            if voice is not None:
                voice.abort()
            leg.task.add_done_callback(lambda _t: self._settle(leg))

    def _leg_ended(self, leg: Leg) -> None:
        """A leg that ended unasked, on shutdown (``begin_shutdown`` finished it: what it
        heard is answered): the session ends too, with an error event first. A leg that
        ended otherwise is replaced by the next audio."""
        if leg.stopped or leg is not self.leg or self.failed.done() \
                or not self.services.shutting_down():
            return

        async def tell() -> None:
            with contextlib.suppress(Exception):
                await self.send(events.error_event(
                    "shutting_down", "the server is shutting down; this session ends",
                    kind="server_error"))
            if not self.failed.done():
                self.failed.set_result(CLOSE_GOING_AWAY)

        self._ending = asyncio.get_running_loop().create_task(tell())

    def _settle(self, leg: Leg) -> None:
        self.output_texts.pop(id(leg), None)
        self.input_texts.pop(id(leg), None)
        if leg.task.done() and not leg.task.cancelled() and leg.task.exception():
            log_unexpected(log, leg.task.exception(), "realtime leg")

    # -- what a leg says ----------------------------------------------------------------
    async def on_leg_frame(self, leg: Leg, frame: dict[str, Any]) -> None:
        if self.failed.done():
            return  # the session is ending: a refused leg's later frames are noise
        kind = frame.get("type")
        elapsed = self.buffer.elapsed_ms
        if kind == "caption" and frame.get("final"):
            segment = int(frame.get("segment", 0))
            if self.config.transcription_model is not None:
                stream = self.input_texts.get(id(leg))
                delta = stream.extend(segment, str(frame.get("source", ""))) if stream else ""
                if delta:
                    await self.send(events.transcript_delta(
                        "session.input_transcript.delta", delta, elapsed))
        elif kind == "commit":
            segment, text = int(frame.get("segment", 0)), str(frame.get("text", ""))
            await self._output(leg, segment, text, elapsed)
            voice = self.voice_outs.get(id(leg))
            if voice is not None:
                voice.committed(segment, leg.output_language, text,
                                str(frame.get("delta", "")))
        elif kind == "error":
            await self.leg_error(leg, frame)

    async def _output(self, leg: Leg, segment: int, text: str, elapsed: int) -> None:
        stream = self.output_texts.get(id(leg))
        delta = stream.extend(segment, text) if stream else ""
        if delta:
            await self.send(events.transcript_delta("session.output_transcript.delta",
                                                    delta, elapsed))

    async def leg_error(self, leg: Leg, frame: dict[str, Any]) -> None:
        code = str(frame.get("code", "server_error"))
        message = str(frame.get("message", ""))
        await self.send(events.error_event(code, message, param=frame.get("param"),
                                           kind="server_error"))
        if not leg.ready and code in FATAL_REFUSALS and not self.failed.done():
            # refused at its start (the live connection stays open, unstarted): the
            # session ends; audio already queued to the leg would only be refused again
            self.failed.set_result(CLOSE_TRY_AGAIN)
            leg.socket.disconnect()
