"""``WebSocket /v1/live``: live captions from an ASR stream (API.md, "Live captions").

One connection is one speaker (a session per target language), in three parts:

- the reader (``LiveConnection``, here): reads frames, validates them before they become
  state (``live_messages``), applies the start deadline and backpressure, and hands each
  frame to what it is: a 'start' to the handshake (``app.live.start``), updates and audio
  to the speaker's input (``app.live.speaker_input``), which hands them to the fan-out. It
  never waits for the model, and never leaves the socket unread long enough for the
  WebSocket keepalive to give up on a client that is there (``live_limits.ReadPauses``).
- the fan-out and its per-language pipelines (``live_pipeline``): coalescing, superseding,
  one engine job per language, display policies, revisions; every final gets exactly one
  caption or one ``error`` frame naming its ``segment`` per language.
- the publisher (``live_publisher``): every frame leaves through it, captions to the
  speaker and, encoded once, to the speaker's talk (``app.rooms.talk``: the room's
  viewers, the room bus, the transcript).

Hostile input never costs the connection: every frame sent is encodable (``live_frames``),
an unexpected exception is logged and answered as ``internal_error`` for its segment, and
the socket is always ended with a close frame. Whatever ends a connection while the client
is there (``stop``, shutdown, a crash) answers every accepted final first: its captions, or
an error frame naming its segment (``FanOut.abandon``). Bounds (frame size, connections,
pending finals) are in ``live_limits``.

What the connection uses of the server comes in a ``LiveServices`` (``live_services``); the
route (``app.api.live``) checks the origin and the API key, then hands the socket to
``serve``, which admits it or refuses it. This module is the connection's life: admission,
the reader's loop, backpressure, shutdown and the end ('done', the close); what each frame
means is in ``app.live.start`` and ``app.live.speaker_input``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from fastapi import WebSocketDisconnect

from app.live.audio import AudioInput
from app.live.frames import FrameError, encode_frame, log_unexpected, parse_frame, safe_echo
from app.live.limits import (
    CLOSE_POLICY,
    CLOSE_TRY_AGAIN,
    ReadPauses,
    admission_refusal,
)
from app.live.messages import sniff_segment
from app.live.pipeline import FanOut
from app.live.publisher import CaptionPublisher, ConnectionGone
from app.live.queue import SegmentQueue
from app.live.services import LiveServices
from app.live.speaker_input import audio_frame, text_update
from app.live.speaker_socket import SpeakerSocket
from app.live.start import start_talk
from app.live.voices import FLUSH_S, ConnectionVoices
from app.supervision import reraise_lost_cancel
from app.translation.backend import client_identity
from app.translation.sessions import Session

log = logging.getLogger("livetrans.live")

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_INTERNAL = 1011


# After 'stop', frames already on the wire are still answered (refused) before 'done'.
LATE_FRAMES_S = 0.2
# On shutdown, what is left untranslated this long before the grace runs out is answered
# with error frames (at most; a quarter of a shorter grace), before the server closes
# every socket (1012) with nothing said.
SHUTDOWN_ANSWER_S = 1.0


def answer_within(grace_s: float) -> float:
    """Seconds after shutdown begins when a live connection stops translating and answers
    what is left: before ``serve`` closes every socket, at the whole seconds of its grace
    (``--shutdown-grace-s``, which uvicorn takes as an integer)."""
    grace = math.floor(grace_s)
    return max(0.0, grace - min(SHUTDOWN_ANSWER_S, grace / 4))


def loop_time() -> float:
    return asyncio.get_running_loop().time()


def _settle_translator(task: asyncio.Task) -> None:
    """Read the outcome of a translator whose client left first: a send to the gone client
    (``ConnectionGone``) is how a client leaving looks; anything else is a bug to log.
    Unread, asyncio would log "Task exception was never retrieved" with a traceback."""
    if task.cancelled():
        return
    crash = task.exception()
    if crash is not None and not isinstance(crash, ConnectionGone):
        log_unexpected(log, crash, "live translator")


class LiveConnection:
    """One speaker's socket: reads and validates frames (the reader), feeds the fan-out
    (``live_pipeline``) and sends through the publisher (``live_publisher``)."""

    def __init__(self, ws: SpeakerSocket, services: LiveServices, owner: str | None) -> None:
        self.ws = ws
        self.services = services
        self.owner = owner
        self.limits = services.limits
        self.talk = services.talk(self)  # in a room once 'start' names one
        self.publisher = CaptionPublisher(ws, self.talk)
        self.fan = FanOut(services, self.publisher, [])  # its languages arrive with 'start'
        # start's "voices": committed text spoken as binary frames (``live_voices``)
        self.voices = ConnectionVoices(self.publisher, services.voices,
                                       services.voice_segments,
                                       services.settings.hls.segment_s)
        self.sessions: dict[str, Session] = {}  # one per target language, in 'start' order
        self.last_final_segment = -1
        self.stopping = False
        self.audio: AudioInput | None = None  # speech in: set by an audio 'start'
        self.audio_task: asyncio.Task | None = None
        self.audio_after_stop_refused = False
        self.pauses = ReadPauses(self.limits.read_pause_s)
        self.worker: asyncio.Task | None = None  # the fan-out, from ``run``
        # set on shutdown: when translation stops and what is left is answered (loop time)
        self.give_up_at: float | None = None
        self.give_up_timer: asyncio.TimerHandle | None = None

    @property
    def queue(self) -> SegmentQueue:
        return self.fan.queue

    async def error(self, code: str, message: str, **where: Any) -> None:
        await self.publisher.error(code, message, **where)

    def begin_shutdown(self) -> None:
        """Finish what was accepted, then 'done' (1001); what the shutdown's grace leaves
        untranslated is answered by error frames (``give_up``) before the server closes."""
        self.stopping = True
        self.end_input()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nothing runs that could be answered
            return
        if self.give_up_timer is None:
            grace_s = self.services.settings.scheduling.shutdown_grace_s
            self.give_up_at = loop.time() + answer_within(grace_s)
            self.give_up_timer = loop.call_at(self.give_up_at, self.give_up)

    def give_up(self) -> None:
        """The shutdown's grace is nearly over: stop translating and recognising; ``run``
        answers every final left with a ``shutting_down`` error frame, then 'done'."""
        for task in (self.worker, self.audio_task):
            if task is not None and not task.done():
                task.cancel()

    def end_input(self) -> None:
        """No more input: an audio source first recognises what is left (it stops the
        fan-out itself), a text source's fan-out translates what is queued."""
        if self.audio is not None:
            self.audio.end()
        else:
            self.fan.stop()

    def end_room(self) -> None:
        self.talk.end()

    def release_sessions(self) -> None:
        for session in self.sessions.values():
            self.services.sessions.release(session)
            self.services.sessions.drop(session.session_id, self.owner)
        self.sessions.clear()

    # -- reader --------------------------------------------------------------------------
    async def run(self) -> None:
        """Read frames until the client leaves or the translator is done, then close."""
        # fair share in the engine: this connection's work is one client's (tasks inherit it)
        client_identity.set(f"live:{id(self):x}")
        worker = self.worker = asyncio.create_task(self.fan.run())
        if self.give_up_at is not None and loop_time() >= self.give_up_at:
            worker.cancel()  # shut down before it began
        settled = False  # the translator's outcome read (else it is read when it ends)
        loop = asyncio.get_running_loop()
        start_by = loop.time() + self.limits.start_timeout_s
        try:
            while not worker.done():
                await self.wait_for_room(worker)
                receive = asyncio.create_task(self.ws.receive())
                asked = loop.time()
                # until 'start' is accepted, the socket has a deadline: an idle one would
                # hold a --max-live-sessions slot forever
                wait_s = None if self.sessions else max(0.0, start_by - asked)
                try:
                    done, _ = await asyncio.wait({receive, worker}, timeout=wait_s,
                                                 return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not receive.done():
                        receive.cancel()
                if not done:
                    await self.error("start_timeout", "no 'start' within "
                                     f"{self.limits.start_timeout_s:g} s; send 'start' first")
                    await self.ws.close(code=CLOSE_POLICY, reason="start timeout")
                    return
                if receive not in done:
                    break
                try:
                    message = receive.result()
                except Exception:  # noqa: BLE001 - receiving on a dead socket
                    return
                if message["type"] == "websocket.disconnect":
                    return
                self.pauses.received(loop.time() - asked)
                await self.handle_message(message)
            settled = True
            code = await self.end_talk(worker)
            if code is not None:
                await self.ws.close(code=code)
        except (ConnectionGone, WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client left; nothing can be sent
        finally:
            if self.give_up_timer is not None:
                self.give_up_timer.cancel()
            if not worker.done():
                worker.cancel()
            self.voices.abort()  # a no-op after end_talk flushed them
            if not settled:
                worker.add_done_callback(_settle_translator)
            if self.audio_task is not None:
                if not self.audio_task.done():
                    self.audio_task.cancel()  # a decode under way finishes, unread
                self.audio_task.add_done_callback(_settle_translator)

    async def end_talk(self, worker: asyncio.Task) -> int | None:
        """The translator ended: answer what it left, say 'done' where the protocol says
        so; the close code, or None when the client is gone."""
        if worker.cancelled():  # the shutdown's grace is over (``give_up``)
            await self.fan.abandon("shutting_down", "the server is shutting down; this "
                                   "final was not translated")
        else:
            crash = worker.exception()
            if isinstance(crash, ConnectionGone):
                return None
            if crash is not None:
                log_unexpected(log, crash, "live translator")
                await self.fan.abandon("internal_error", "Internal server error.")
                return CLOSE_INTERNAL
            if not await self.refuse_late_frames():
                return None
        # what the voices were given is heard before 'done' (within the shutdown's grace)
        flush_s = FLUSH_S
        if self.give_up_at is not None:
            flush_s = max(0.0, min(flush_s, self.give_up_at - loop_time()))
        await self.voices.finish(flush_s)
        # the room is free on every replica before the speaker hears 'done'
        await self.talk.finish()
        await self.publisher.send({"type": "done"})
        return CLOSE_GOING_AWAY if self.services.shutting_down() else CLOSE_NORMAL

    async def refuse_late_frames(self) -> bool:
        """Answer frames that crossed 'stop' on the wire before 'done' is sent.

        The translator is finished, but a final the client sent just after 'stop' may
        already be on its way: it must be refused by an error frame naming it (``stopping``),
        not lost in the close. Frames are read until none arrived for ``LATE_FRAMES_S``
        (or the shutdown's grace is over); False if the client left meanwhile.
        """
        while True:
            wait_s = LATE_FRAMES_S
            if self.give_up_at is not None:
                wait_s = min(wait_s, self.give_up_at - loop_time())
                if wait_s <= 0:
                    return True
            try:
                # not wait_for, which on 3.11 loses a cancel that comes as a message does
                async with asyncio.timeout(wait_s):
                    message = await self.ws.receive()
            except TimeoutError:
                reraise_lost_cancel()  # a cancel that met this timeout comes back as one
                return True
            except Exception:  # noqa: BLE001 - receiving on a dead socket
                return False
            if message["type"] == "websocket.disconnect":
                return False
            await self.handle_message(message)

    def full(self) -> bool:
        """No room for another final (``max_pending_finals`` wait) or for more audio."""
        audio = self.audio
        return (len(self.queue.finals) >= self.limits.max_pending_finals
                or (audio is not None and audio.full))

    async def wait_for_room(self, worker: asyncio.Task) -> None:
        """Backpressure: while there is no room, stop reading (the client's sends wait in
        TCP instead of growing this queue), within the budget of ``self.pauses``.

        A spent budget means: read on. A final that finds no room gets
        ``too_many_pending`` naming its segment, audio beyond the backlog is dropped with
        ``audio_overrun``, and the keepalive's pong, behind the client's frames, is read:
        the connection outlives any overload. After 'stop' nothing needs room (everything
        is refused), so the socket is read at once.
        """
        loop = asyncio.get_running_loop()
        while not self.stopping and self.full() and not worker.done():
            left = self.pauses.left()
            if left <= 0:
                return
            audio = self.audio
            event = audio.room if audio is not None and audio.full else self.queue.room
            event.clear()
            room = asyncio.create_task(event.wait())
            began = loop.time()
            try:
                await asyncio.wait({room, worker}, timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                room.cancel()
                self.pauses.paused(loop.time() - began)

    async def handle_message(self, message: dict[str, Any]) -> None:
        """One received frame; a bug while handling it is answered, never fatal."""
        try:
            if message.get("bytes") is not None:
                await audio_frame(self, message["bytes"])
            else:
                await self.handle_frame(message.get("text") or "")
        except ConnectionGone:
            raise
        except Exception as exc:  # noqa: BLE001 - logged, answered, connection kept
            log_unexpected(log, exc, "live reader")
            await self.error("internal_error", "Internal server error.")

    async def handle_frame(self, raw: str) -> None:
        if len(raw) > self.limits.max_frame_chars:
            segment, final = sniff_segment(raw)
            await self.error("too_large", f"message of {len(raw)} characters; the limit is "
                             f"{self.limits.max_frame_chars}", segment=segment, final=final)
            return
        try:
            msg = parse_frame(raw)
        except FrameError as exc:
            await self.error(exc.code, exc.message)
            return
        kind = msg["type"]
        if kind == "start":
            await start_talk(self, msg)
        elif kind in ("partial", "final"):
            await text_update(self, msg, final=kind == "final")
        elif kind == "stop":
            self.stopping = True
            self.end_input()
        elif kind == "voice":
            await self.voices.switch(msg)
        else:
            await self.error("unknown_type", f"unknown message type '{safe_echo(kind)}'")


def _capacity_refusal(services: LiveServices) -> str | None:
    """Why a new live session must wait for another time (None: admit it).

    Admission control: a session admitted beyond what the engine can serve would get its
    captions minutes late; refused at once, its client can retry or go elsewhere. Two
    bounds: ``--max-live-sessions`` and the queue-time bound (``--max-queue-wait-s``:
    queued work already waits longer than a caption may take).
    """
    limit = services.settings.live.max_sessions
    if len(services.connections) >= limit:
        return (f"server busy: {limit} live sessions running (--max-live-sessions); "
                "retry later")
    return services.overload()


async def refuse(ws: SpeakerSocket, close_code: int, reason: str,
                 error: dict[str, str] | None = None) -> None:
    """Accept, optionally explain in an error frame, then close with ``close_code``: a
    client sees a close code and reason, where a refused handshake is a bare HTTP 403."""
    try:
        await ws.accept()
        if error is not None:
            await ws.send_text(encode_frame({"type": "error", **error}))
        await ws.close(code=close_code, reason=reason)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


async def serve(ws: SpeakerSocket, services: LiveServices, owner: str | None) -> None:
    """A speaker's socket whose origin and API key passed (``app.api.live``): admitted, it
    runs until it ends; else it is refused with a close code and an error frame."""
    limits = services.limits
    refusal = admission_refusal([c.owner for c in services.connections], owner, limits)
    if refusal is not None:
        await refuse(ws, CLOSE_TRY_AGAIN, "too many connections",
                     {"code": "too_many_connections", "message": refusal})
        return
    if not services.ready():
        await refuse(ws, CLOSE_TRY_AGAIN, "not ready",
                     {"code": "not_ready", "message": "the model is still loading"})
        return
    busy = _capacity_refusal(services)
    if busy is not None:
        services.metrics.refused_busy()
        await refuse(ws, CLOSE_TRY_AGAIN, "busy", {"code": "busy", "message": busy})
        return
    # registered before the first await, so concurrent handshakes count each other
    conn = LiveConnection(ws, services, owner)
    services.connections.add(conn)
    try:
        await ws.accept()
        await conn.run()
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    finally:
        services.connections.discard(conn)
        conn.end_room()
        conn.release_sessions()
