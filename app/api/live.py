"""``WebSocket /v1/live``: live captions from an ASR stream (API.md, "Live captions").

One connection is one speaker (a session per target language). The socket's reader never
waits for the model: it files each message into ``SegmentQueue`` and a separate task
translates. While an update is being translated, newer partials replace the waiting one
(coalescing: only the newest hypothesis is worth a forward pass), and finals queue in order
and are never dropped, so every final gets exactly one answer per language: a caption with
``"final": true``, or, when it cannot be translated (refused at the edge, or failed in the
engine), one ``error`` frame naming its ``segment``.

Events (API.md, "Events: several languages, rooms, viewers"): ``target_langs`` fans each
update out into every language at once, one engine job and one session (own SSBD draft)
per language, awaited together so the step engine decodes them in the same forward passes;
each caption names its ``lang``. ``display_mode`` picks the display policy
(``app.display``) that makes ``display_text``, one policy per (segment, language). A
``room`` publishes every caption frame, encoded once, to the room's viewers
(``app.api.rooms``, ``app.api.watch``); publishing never waits for a viewer.

Hostile input never costs the connection: a message is validated before it becomes state
(``live_messages``), every frame sent is encodable (``live_frames``), an unexpected
exception is logged and answered as ``internal_error`` for its segment, and the socket is
always ended with a close frame. Bounds (frame size, connections, pending finals, origins)
are in ``live_limits``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from app.api.errors import map_engine_error
from app.api.live_frames import FrameError, encode_frame, log_unexpected, parse_frame, safe_echo
from app.api.live_limits import (
    CLOSE_POLICY,
    CLOSE_TRY_AGAIN,
    LiveLimits,
    admission_refusal,
    limits_of,
)
from app.api.live_messages import (
    Refusal,
    parse_start_targets,
    parse_text,
    segment_of,
    sniff_segment,
)
from app.api.live_queue import SegmentQueue, Update
from app.api.origins import origin_allowed
from app.api.rooms import Room, RoomTakenError
from app.api.state import ServerState
from app.display import DisplayPolicy, Translation, display_policy, display_unit
from app.engine.engine import GenerationResult
from app.engine.worker import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    JobCancelledError,
    QueueFullError,
    client_identity,
)
from app.sessions import Session, SessionStoreFullError
from app.translator import TranslateOptions

log = logging.getLogger("livetrans.live")
router = APIRouter()

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_INTERNAL = 1011
MAX_POLICIES = 64  # display policies kept per connection ((segment, language) pairs)


class ConnectionGone(Exception):
    """The client is gone (or the socket already closed): nothing more can be sent."""


# After 'stop', frames already on the wire are still answered (refused) before 'done'.
LATE_FRAMES_S = 0.2


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
    def __init__(self, ws: WebSocket, state: ServerState, owner: str | None,
                 limits: LiveLimits | None = None) -> None:
        self.ws = ws
        self.state = state
        self.owner = owner
        self.limits = limits or LiveLimits()
        # fan-out: one session (own SSBD draft) and one set of options per target language,
        # in the client's order; a single-language connection is the case of one
        self.langs: list[str] = []
        self.sessions: dict[str, Session] = {}
        self.options: dict[str, TranslateOptions] = {}
        self.display_mode = "mask-k"
        # display policy per (segment, language): a final of one segment may be queued
        # while partials of the next are shown, so one per segment, dropped after its final
        self.policies: dict[tuple[int, str], DisplayPolicy] = {}
        self.room: Room | None = None
        self.queue = SegmentQueue()
        self.last_final_segment = -1
        self.revisions: dict[tuple[int, str], int] = {}
        self.stopping = False
        self.send_lock = asyncio.Lock()
        # the partial's jobs handed to the engine queue (shared cancel, one started event
        # per language), while they wait there
        self.inflight: tuple[threading.Event, list[threading.Event]] | None = None
        self.superseding = asyncio.Event()  # set when a newer update makes the queued one stale
        self.superseded = 0
        # queue positions (one per language) of a partial that was superseded while waiting:
        # its replacement takes the same places instead of going to the back of the queue
        self.partial_seqs: dict[str, int] | None = None

    @property
    def session(self) -> Session | None:
        """The first language's session (what ``ready`` names)."""
        return self.sessions.get(self.langs[0]) if self.langs else None

    async def send(self, payload: dict[str, Any]) -> None:
        """Send one frame; it always encodes, and a closed socket raises ``ConnectionGone``."""
        await self.send_text(encode_frame(payload))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (``encode_frame``); a closed socket: ``ConnectionGone``."""
        async with self.send_lock:
            try:
                await self.ws.send_text(text)
            except Exception as exc:  # noqa: BLE001 - every send failure means the same
                raise ConnectionGone(type(exc).__name__) from exc

    async def error(self, code: str, message: str, *, segment: int | None = None,
                    final: bool = False, param: str | None = None,
                    lang: str | None = None) -> None:
        """An ``error`` frame; one about a segment names it and whether it answers a final,
        and, when one target language failed, which one."""
        payload: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if segment is not None:
            payload["segment"] = segment
            payload["final"] = final
        if lang is not None:
            payload["lang"] = lang
        if param is not None:
            payload["param"] = param
        await self.send(payload)

    def begin_shutdown(self) -> None:
        self.stopping = True
        self.queue.changed.set()

    def end_room(self) -> None:
        """The talk is over (``done`` sent, or the speaker left): viewers get ``ended``."""
        if self.room is not None:
            self.state.rooms.release(self.room, self)
            self.room = None

    def release_sessions(self) -> None:
        for session in self.sessions.values():
            self.state.sessions.release(session)
            self.state.sessions.drop(session.session_id, self.owner)
        self.sessions.clear()

    # -- reader --------------------------------------------------------------------------
    async def run(self) -> None:
        """Read frames until the client leaves or the translator is done, then close."""
        # fair share in the engine: this connection's work is one client's (tasks inherit it)
        client_identity.set(f"live:{id(self):x}")
        worker = asyncio.create_task(self.process())
        settled = False  # the translator's outcome read (else it is read when it ends)
        loop = asyncio.get_running_loop()
        start_by = loop.time() + self.limits.start_timeout_s
        try:
            while not worker.done():
                await self.wait_for_room(worker)
                receive = asyncio.create_task(self.ws.receive())
                # until 'start' is accepted, the socket has a deadline: an idle one would
                # hold a --max-live-sessions slot forever
                wait_s = None if self.sessions else max(0.0, start_by - loop.time())
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
                await self.handle_message(message)
            crash, settled = worker.exception(), True
            if isinstance(crash, ConnectionGone):
                return
            if crash is not None:
                log_unexpected(log, crash, "live translator")
                code = CLOSE_INTERNAL
            else:
                if not await self.refuse_late_frames():
                    return
                await self.send({"type": "done"})
                self.end_room()
                code = CLOSE_GOING_AWAY if self.state.shutting_down else CLOSE_NORMAL
            await self.ws.close(code=code)
        except (ConnectionGone, WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client left; nothing can be sent
        finally:
            if not worker.done():
                worker.cancel()
            if not settled:
                worker.add_done_callback(_settle_translator)

    async def refuse_late_frames(self) -> bool:
        """Answer frames that crossed 'stop' on the wire before 'done' is sent.

        The translator is finished, but a final the client sent just after 'stop' may
        already be on its way: it must be refused by an error frame naming it (``stopping``),
        not lost in the close. Frames are read until none arrived for ``LATE_FRAMES_S``;
        False if the client left meanwhile.
        """
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), LATE_FRAMES_S)
            except TimeoutError:
                return True
            except Exception:  # noqa: BLE001 - receiving on a dead socket
                return False
            if message["type"] == "websocket.disconnect":
                return False
            await self.handle_message(message)

    async def wait_for_room(self, worker: asyncio.Task) -> None:
        """Backpressure: while ``max_pending_finals`` finals wait, stop reading (the client's
        sends block in TCP instead of growing this queue), for up to ``backpressure_s``."""
        limit = self.limits.max_pending_finals
        if len(self.queue.finals) < limit:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.backpressure_s
        while len(self.queue.finals) >= limit and not worker.done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return  # read on: a final beyond the bound gets 'too_many_pending'
            self.queue.room.clear()
            room = asyncio.create_task(self.queue.room.wait())
            try:
                await asyncio.wait({room, worker}, timeout=remaining,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                room.cancel()

    async def handle_message(self, message: dict[str, Any]) -> None:
        """One received frame; a bug while handling it is answered, never fatal."""
        try:
            if message.get("bytes") is not None:
                await self.error("binary_not_supported", "send JSON text frames")
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
            await self.start(msg)
        elif kind in ("partial", "final"):
            await self.enqueue(msg, final=kind == "final")
        elif kind == "stop":
            self.stopping = True
            self.queue.changed.set()
        else:
            await self.error("unknown_type", f"unknown message type '{safe_echo(kind)}'")

    async def start(self, msg: dict[str, Any]) -> None:
        if self.sessions:
            await self.error("already_started", "'start' was already received")
            return
        if self.stopping:
            await self.error("stopping", "'stop' was already received")
            return
        try:
            start, targets, source = parse_start_targets(msg)
        except Refusal as exc:
            await self.error(exc.code, exc.message, param=exc.param)
            return
        target_param = "target_langs" if start.target_langs else "target_lang"
        unserved = self.state.unserved({**{f"{target_param}:{t}": t for t in targets},
                                        "source_lang": source})
        if unserved:
            await self.error("language_not_served", unserved[1],
                             param=unserved[0].split(":", 1)[0])
            return
        settings = self.state.settings
        options = {target: start.translate_options(source, target, settings.max_new_tokens)
                   for target in targets}
        registry = self.state.rooms
        room = None
        if start.room is not None:
            try:
                room = registry.claim(start.room, self, targets)
            except RoomTakenError:
                await self.error("room_taken", f"room '{start.room}' already has a speaker; "
                                 "choose another room or stop the other speaker", param="room")
                return
        sessions: dict[str, Session] = {}
        try:
            for target in targets:
                sessions[target] = self.state.sessions.acquire(None, self.owner)
        except SessionStoreFullError:
            for session in sessions.values():
                self.state.sessions.release(session)
                self.state.sessions.drop(session.session_id, self.owner)
            if room is not None:
                registry.release(room, self)
            await self.error("server_busy", "every session slot is busy; retry later")
            return
        self.langs, self.sessions, self.options = targets, sessions, options
        self.display_mode, self.room = start.display_mode, room
        ready: dict[str, Any] = {"type": "ready", "session_id": sessions[targets[0]].session_id,
                                 "langs": targets, "display_mode": start.display_mode}
        if room is not None:
            ready["room"] = room.name
            if registry.tokens_required:
                ready["viewer_token"] = registry.token(room.name)
        await self.send(ready)

    async def enqueue(self, msg: dict[str, Any], final: bool) -> None:
        seg = segment_of(msg)
        if not self.sessions:
            await self.error("not_started", "send 'start' first", segment=seg, final=final)
            return
        if self.stopping:
            await self.error("stopping", "'stop' was received (or the server is shutting "
                             "down); no new updates", segment=seg, final=final)
            return
        try:
            m = parse_text(msg, self.state.settings.max_source_chars)
        except Refusal as exc:
            await self.error(exc.code, exc.message, segment=seg, final=final, param=exc.param)
            return
        if m.segment <= self.last_final_segment:
            await self.error("stale_segment", f"segment {m.segment} is already final",
                             segment=m.segment, final=final)
            return
        if not m.text.strip():
            if final:
                await self.error("empty_text", "a final needs text", segment=m.segment,
                                 final=True, param="text")
            return
        if final and len(self.queue.finals) >= self.limits.max_pending_finals:
            await self.error("too_many_pending", f"{len(self.queue.finals)} finals are "
                             "waiting to be translated; slow down and send this one again",
                             segment=m.segment, final=True)
            return
        if final:
            self.last_final_segment = m.segment
        self.queue.put(Update(m.segment, m.text, final))
        if self.inflight is not None:
            cancel, started = self.inflight
            if not any(s.is_set() for s in started):
                # The queued partial is stale before it costs a forward pass: drop it now, so
                # a final behind it is not held up until the partial's turn in the queue.
                cancel.set()
                self.superseding.set()
            elif final:
                # A running partial is stale once the final is here: it stops at its next
                # forward pass (no caption, no draft) instead of making the final wait for it.
                cancel.set()

    # -- translator ----------------------------------------------------------------------
    async def process(self) -> None:
        """Translate queued updates one at a time until 'stop' and an empty queue."""
        while True:
            update = self.queue.take()
            if update is None:
                if self.stopping:
                    return  # the reader refuses late frames, then sends 'done'
                self.queue.changed.clear()
                await self.queue.changed.wait()
                continue
            try:
                await self.translate(update)
            except ConnectionGone:
                raise
            except Exception as exc:  # noqa: BLE001 - one update's bug, not the connection's
                log_unexpected(log, exc, "live translator", update.segment)
                await self.error("internal_error", "Internal server error.",
                                 segment=update.segment, final=update.final)

    async def translate(self, update: Update) -> None:
        """One update into every target language at once.

        Each language is its own engine job (``asyncio.gather``), so the step engine decodes
        them in the same forward passes; each sends its caption (or its error) as soon as it
        is done, and the next update starts when all are. A partial superseded while every
        language still waits in the queue is dropped as a whole; once one runs, the others
        run too (only a final cancels running partials).
        """
        assert self.sessions and self.options
        # another segment than the sessions' current one starts with an empty draft, even
        # if no final closed the last one
        for session in self.sessions.values():
            session.enter_segment(update.segment)
        if not update.final:
            self.forget_policies(update.segment)
        started = time.perf_counter()
        cancel = threading.Event()
        begun = {lang: threading.Event() for lang in self.langs}
        seqs: dict[str, int | None] = dict.fromkeys(self.langs)
        if not update.final:
            self.inflight = (cancel, list(begun.values()))
            if self.partial_seqs is None:
                self.partial_seqs = {lang: self.state.worker.next_seq() for lang in self.langs}
            seqs.update(self.partial_seqs)
        self.superseding.clear()
        jobs = [asyncio.create_task(self.translate_one(update, lang, started, cancel,
                                                       begun[lang], seqs[lang]))
                for lang in self.langs]
        everything = asyncio.gather(*jobs, return_exceptions=True)
        try:
            if not update.final:
                stale = asyncio.create_task(self.superseding.wait())
                try:
                    await asyncio.wait({everything, stale},
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # also when this task is cancelled (the client left): a task left
                    # pending on the event is destroyed with the connection, and asyncio
                    # logs "Task was destroyed but it is pending!" at ERROR
                    stale.cancel()
                if not everything.done() and not any(b.is_set() for b in begun.values()):
                    for job in jobs:
                        job.cancel()  # the engine skips them when their turn comes
                    await asyncio.wait(jobs)
                    self.superseded += 1  # a newer update replaced it while it waited
                    return
            results = await everything
        finally:
            self.inflight = None
            if update.final or any(b.is_set() for b in begun.values()):
                self.partial_seqs = None  # it ran: the next partial queues anew
        if not update.final and any(r is True for r in results):
            self.superseded += 1  # stopped by a final while running
        for lang, result in zip(self.langs, results, strict=True):
            if isinstance(result, ConnectionGone):
                raise result
            if isinstance(result, BaseException):
                log_unexpected(log, result, "live translator", update.segment)
                await self.error("internal_error", "Internal server error.",
                                 segment=update.segment, final=update.final, lang=lang)

    async def translate_one(self, update: Update, lang: str, started: float,
                            cancel: threading.Event, begun: threading.Event,
                            seq: int | None) -> bool:
        """Translate ``update`` into ``lang`` and send its caption, or one error frame
        naming the segment and the language. True when the job was cancelled (superseded
        partial): it sends nothing then."""
        session, options = self.sessions[lang], self.options[lang]
        try:
            outcome = await self.state.translator.translate(
                update.text, options, session=session, is_final=update.final,
                priority=PRIORITY_FINAL if update.final else PRIORITY_PARTIAL,
                bypass_limit=update.final, cancel=cancel, started=begun, queue_seq=seq,
            )
        except JobCancelledError:
            if update.final:  # finals are never superseded; should it happen, say so
                await self.error("cancelled", "the final was cancelled",
                                 segment=update.segment, final=True, lang=lang)
                return False
            return True
        except QueueFullError:
            await self.error("overloaded", "server busy; partial dropped",
                             segment=update.segment, final=update.final, lang=lang)
            return False
        except Exception as exc:  # noqa: BLE001 - reported as an error frame
            err = map_engine_error(exc)
            if err.status >= 500 and err.code == "internal_error":
                log_unexpected(log, exc, "live translation", update.segment)
            await self.error(err.code or "error", err.message, segment=update.segment,
                             final=update.final, lang=lang)
            return False
        if outcome.result.finish_reason == "cancelled":
            if update.final:
                await self.error("cancelled", "the final was cancelled",
                                 segment=update.segment, final=True, lang=lang)
                return False
            return True
        key = (update.segment, lang)
        if update.final:
            revision = self.revisions.pop(key, 0) + 1  # the segment is closed
        else:
            revision = self.revisions.get(key, 0) + 1
            self.revisions[key] = revision
        r = outcome.result
        display = self.display(key, Translation(outcome.text, update.final, r.tokens))
        now = time.perf_counter()
        queue_ms = (started - update.received) * 1000 + max(
            0.0, (now - started) * 1000 - r.decode_ms)
        if update.final:
            self.state.metrics.caption_seconds.observe(now - update.received)
        self.state.metrics.observe_generation(r, route="live")
        self.state.metrics.observe_verdict(outcome)
        payload = {
            "type": "caption", "segment": update.segment, "lang": lang, "revision": revision,
            "source": update.text, "text": outcome.text, "display_text": display,
            "final": update.final,
            "stats": {
                **draft_stats(r),
                "forward_passes": r.forward_passes,
                "decode_ms": round(r.decode_ms, 2), "queue_wait_ms": round(queue_ms, 2),
                "coalesced": self.queue.coalesced, "superseded": self.superseded,
                "pathology": outcome.pathology, "draft_dropped": outcome.draft_dropped,
                "retried": outcome.retried,
            },
        }
        text = encode_frame(payload)
        if self.room is not None:
            self.room.publish(lang, payload, text, update.final)  # never waits for viewers
        await self.send_text(text)
        return False

    # -- display -------------------------------------------------------------------------
    def display(self, key: tuple[int, str], out: Translation) -> str:
        """What viewers see of this output: the (segment, language)'s display policy, made
        on the segment's first caption and forgotten after its final."""
        policy = self.policies.get(key)
        if policy is None:
            lang = key[1]
            detokenize = None
            if self.display_mode == "mask-k":
                # counts tokens as the translator's display-only mask does
                detokenize = self.state.worker.engine.rt.detokenize
            policy = display_policy(self.display_mode, self.options[lang].mask_k,
                                    unit=display_unit(lang), detokenize=detokenize)
            self.policies[key] = policy
        shown = policy.show(out)
        if out.final:
            self.policies.pop(key, None)
        return shown

    def forget_policies(self, segment: int) -> None:
        """A partial of ``segment`` is being translated: earlier segments' partial displays
        are over (their finals, if still to come, show the final whole anyway)."""
        stale = [k for k in self.policies if k[0] < segment]
        for k in stale:
            del self.policies[k]
        while len(self.policies) > MAX_POLICIES:  # out-of-order segment numbers
            del self.policies[min(self.policies)]


def draft_stats(result: GenerationResult) -> dict[str, Any]:
    """A caption's draft counts, all read from ``result.drafts``: the totals and SSBD-only
    fields clients have always read, and ``drafts`` (proposed / accepted by source)."""
    d = result.drafts
    return {
        "draft_tokens": d.total_proposed, "accepted_tokens": d.total_accepted,
        "new_tokens": len(result.tokens) - d.total_accepted,
        "ssbd_draft_tokens": d.ssbd_proposed, "ssbd_accepted_tokens": d.ssbd_accepted,
        "drafts": d.as_dict(),
    }


def _capacity_refusal(state: ServerState) -> str | None:
    """Why a new live session must wait for another time (None: admit it).

    Admission control: a session admitted beyond what the engine can serve would get its
    captions minutes late; refused at once, its client can retry or go elsewhere. Two
    bounds: ``--max-live-sessions`` and the queue-time bound (``--max-queue-wait-s``:
    queued work already waits longer than a caption may take).
    """
    limit = state.settings.max_live_sessions
    if len(state.live_connections) >= limit:
        return (f"server busy: {limit} live sessions running (--max-live-sessions); "
                "retry later")
    return state.worker.overload() if state.worker is not None else None


async def _refuse(ws: WebSocket, close_code: int, reason: str,
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


@router.websocket("/v1/live")
async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    if not origin_allowed(ws, state.settings):
        await _refuse(ws, CLOSE_POLICY, "origin not allowed")
        return
    accepted, owner = state.auth.check_websocket(ws)
    if not accepted:
        await _refuse(ws, CLOSE_POLICY, "invalid API key")
        return
    limits = limits_of(state)
    refusal = admission_refusal([c.owner for c in state.live_connections], owner, limits)
    if refusal is not None:
        await _refuse(ws, CLOSE_TRY_AGAIN, "too many connections",
                      {"code": "too_many_connections", "message": refusal})
        return
    if not state.ready:
        await _refuse(ws, CLOSE_TRY_AGAIN, "not ready",
                      {"code": "not_ready", "message": "the model is still loading"})
        return
    busy = _capacity_refusal(state)
    if busy is not None:
        state.metrics.admission_refusals.labels("live_busy").inc()
        await _refuse(ws, CLOSE_TRY_AGAIN, "busy", {"code": "busy", "message": busy})
        return
    # registered before the first await, so concurrent handshakes count each other
    conn = LiveConnection(ws, state, owner, limits)
    state.live_connections.add(conn)
    try:
        await ws.accept()
        await conn.run()
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    finally:
        state.live_connections.discard(conn)
        conn.end_room()
        conn.release_sessions()
