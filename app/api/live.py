"""``WebSocket /v1/live``: live captions from an ASR stream (API.md, "Live captions").

One connection is one session. The socket's reader never waits for the model: it files
each message into ``SegmentQueue`` and a separate task translates. While an update is being
translated, newer partials replace the waiting one (coalescing: only the newest hypothesis
is worth a forward pass), and finals queue in order and are never dropped, so every final
gets exactly one caption with ``"final": true``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field, ValidationError

from app.api.chat import map_engine_error
from app.engine.worker import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    JobCancelledError,
    QueueFullError,
)
from app.prompts import UnsupportedLanguageError, check_language
from app.sessions import Session
from app.state import ServerState
from app.translator import TranslateOptions

log = logging.getLogger("livetrans.live")
router = APIRouter()

MAX_FRAME_CHARS = 64_000
CLOSE_GOING_AWAY = 1001


class StartMessage(BaseModel):
    type: str
    target_lang: str
    source_lang: str = "en"
    beta: float = Field(0.2, ge=0.0, lt=1.0)
    mask_k: int = Field(3, ge=0, le=64)
    drafters: list[str] | None = None
    bias_scope: Literal["all", "agreed"] = "all"


class TextMessage(BaseModel):
    type: str
    segment: int = Field(ge=0)
    text: str


@dataclass
class Update:
    segment: int
    text: str
    final: bool
    received: float = field(default_factory=time.perf_counter)


class SegmentQueue:
    """Pending work of one connection: ordered finals plus at most one newest partial."""

    def __init__(self) -> None:
        self.finals: deque[Update] = deque()
        self.partial: Update | None = None
        self.coalesced = 0
        self.changed = asyncio.Event()

    def put(self, update: Update) -> None:
        if update.final:
            self.finals.append(update)
            if self.partial is not None and self.partial.segment <= update.segment:
                self.partial = None  # the final supersedes its segment's partial
                self.coalesced += 1
        else:
            if self.partial is not None:
                self.coalesced += 1
            self.partial = update
        self.changed.set()

    def take(self) -> Update | None:
        if self.finals:
            return self.finals.popleft()
        update, self.partial = self.partial, None
        return update

    def empty(self) -> bool:
        return not self.finals and self.partial is None


class LiveConnection:
    def __init__(self, ws: WebSocket, state: ServerState, owner: str | None) -> None:
        self.ws = ws
        self.state = state
        self.owner = owner
        self.session: Session | None = None
        self.options: TranslateOptions | None = None
        self.queue = SegmentQueue()
        self.last_final_segment = -1
        self.revisions: dict[int, int] = {}
        self.draft_segment: int | None = None
        self.stopping = False
        self.send_lock = asyncio.Lock()
        # the partial handed to the engine queue, while it waits there
        self.inflight: tuple[threading.Event, threading.Event] | None = None
        self.superseding = asyncio.Event()  # set when a newer update makes the queued one stale
        self.superseded = 0
        # queue position of a partial that was superseded while waiting: its replacement
        # takes the same place instead of going to the back of the engine queue
        self.partial_seq: int | None = None

    async def send(self, payload: dict[str, Any]) -> None:
        async with self.send_lock:
            await self.ws.send_text(json.dumps(payload, ensure_ascii=False))

    async def error(self, code: str, message: str) -> None:
        await self.send({"type": "error", "code": code, "message": message})

    def begin_shutdown(self) -> None:
        self.stopping = True
        self.queue.changed.set()

    # -- reader --------------------------------------------------------------------------
    async def handle_frame(self, raw: str) -> None:
        if len(raw) > MAX_FRAME_CHARS:
            await self.error("too_large", f"message of {len(raw)} characters; the limit is "
                                          f"{MAX_FRAME_CHARS}")
            return
        try:
            msg = json.loads(raw)
        except json.JSONDecodeError as exc:
            await self.error("invalid_json", f"not valid JSON: {exc.msg}")
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            await self.error("invalid_message", "a message is a JSON object with a 'type'")
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
            await self.error("unknown_type", f"unknown message type '{kind}'")

    async def start(self, msg: dict) -> None:
        if self.session is not None:
            await self.error("already_started", "'start' was already received")
            return
        try:
            start = StartMessage.model_validate(msg)
            target = check_language(start.target_lang, "target_lang")
            source = check_language(start.source_lang, "source_lang")
        except ValidationError as exc:
            await self.error("invalid_message", _first_error(exc))
            return
        except UnsupportedLanguageError as exc:
            await self.error("unsupported_language", str(exc))
            return
        settings = self.state.settings
        self.options = TranslateOptions(
            source_lang=source, target_lang=target, beta=start.beta, mask_k=start.mask_k,
            drafters=start.drafters, max_tokens=settings.max_new_tokens,
            bias_scope=start.bias_scope,
        )
        self.session = self.state.sessions.acquire(None, self.owner)
        await self.send({"type": "ready", "session_id": self.session.session_id})

    async def enqueue(self, msg: dict, final: bool) -> None:
        if self.session is None:
            await self.error("not_started", "send 'start' first")
            return
        try:
            m = TextMessage.model_validate(msg)
        except ValidationError as exc:
            await self.error("invalid_message", _first_error(exc))
            return
        if m.segment <= self.last_final_segment:
            await self.error("stale_segment", f"segment {m.segment} is already final")
            return
        if len(m.text) > self.state.settings.max_source_chars:
            await self.error("too_large", "text is longer than the server's source limit")
            return
        if not m.text.strip():
            if final:
                await self.error("empty_text", "a final needs text")
            return
        if final:
            self.last_final_segment = m.segment
        self.queue.put(Update(m.segment, m.text, final))
        if self.inflight is not None:
            cancel, started = self.inflight
            if not started.is_set():
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
                    await self.send({"type": "done"})
                    return
                self.queue.changed.clear()
                await self.queue.changed.wait()
                continue
            await self.translate(update)

    async def translate(self, update: Update) -> None:
        assert self.session is not None and self.options is not None
        if self.draft_segment != update.segment:
            # A new segment starts with an empty draft, even if no final closed the last one.
            self.session.previous_tokens = []
            self.draft_segment = update.segment
        started = time.perf_counter()
        cancel, job_started = threading.Event(), threading.Event()
        seq = None
        if not update.final:
            self.inflight = (cancel, job_started)
            if self.partial_seq is None:
                self.partial_seq = self.state.worker.next_seq()
            seq = self.partial_seq
        self.superseding.clear()
        try:
            job = asyncio.create_task(self.state.translator.translate(
                update.text, self.options, session=self.session, is_final=update.final,
                priority=PRIORITY_FINAL if update.final else PRIORITY_PARTIAL,
                bypass_limit=update.final, cancel=cancel, started=job_started, seq=seq,
            ))
            if not update.final:
                stale = asyncio.create_task(self.superseding.wait())
                await asyncio.wait({job, stale}, return_when=asyncio.FIRST_COMPLETED)
                stale.cancel()
                if not job.done() and not job_started.is_set():
                    job.cancel()  # the engine skips it when its turn comes
                    raise JobCancelledError("superseded while queued")
            outcome = await job
        except JobCancelledError:
            self.superseded += 1  # a newer update replaced it while it waited
            return
        except QueueFullError:
            await self.error("overloaded", "server busy; partial dropped")
            return
        except Exception as exc:  # noqa: BLE001 - reported as an error frame
            err = map_engine_error(exc)
            await self.error(err.code or "error", err.message)
            return
        finally:
            self.inflight = None
            if job_started.is_set() or update.final:
                self.partial_seq = None  # it ran: the next partial queues anew
        if outcome.result.finish_reason == "cancelled":
            self.superseded += 1
            return
        if update.final:
            self.draft_segment = None
        revision = self.revisions.get(update.segment, 0) + 1
        self.revisions[update.segment] = revision
        r = outcome.result
        now = time.perf_counter()
        queue_ms = (started - update.received) * 1000 + max(
            0.0, (now - started) * 1000 - r.decode_ms)
        if update.final:
            self.state.metrics.caption_seconds.observe(now - update.received)
        self.state.metrics.observe_generation(r, route="live")
        await self.send({
            "type": "caption", "segment": update.segment, "revision": revision,
            "source": update.text, "text": outcome.text, "display_text": outcome.display_text,
            "final": update.final,
            "stats": {
                "draft_tokens": r.draft_tokens, "accepted_tokens": r.accepted_tokens,
                "new_tokens": r.new_tokens, "ssbd_draft_tokens": r.ssbd_draft_tokens,
                "ssbd_accepted_tokens": r.ssbd_accepted_tokens,
                "forward_passes": r.forward_passes,
                "decode_ms": round(r.decode_ms, 2), "queue_wait_ms": round(queue_ms, 2),
                "coalesced": self.queue.coalesced, "superseded": self.superseded,
            },
        })


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg')}" if where else str(err.get("msg"))


@router.websocket("/v1/live")
async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    owner = None
    if state.api_keys:
        auth = ws.headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        key = key or ws.query_params.get("api_key", "")
        if key not in state.api_keys:
            # Accept first so the client sees a close code (1008) and reason, not a bare 403.
            await ws.accept()
            await ws.close(code=1008, reason="invalid API key")
            return
        import hashlib

        owner = hashlib.sha256(key.encode()).hexdigest()[:16]
    await ws.accept()
    if not state.ready:
        await ws.send_text(json.dumps({"type": "error", "code": "not_ready",
                                       "message": "the model is still loading"}))
        await ws.close(code=1013)
        return
    conn = LiveConnection(ws, state, owner)
    state.live_connections.add(conn)
    worker = asyncio.create_task(conn.process())
    try:
        while not worker.done():
            receive = asyncio.create_task(ws.receive())
            done, _ = await asyncio.wait({receive, worker}, return_when=asyncio.FIRST_COMPLETED)
            if receive not in done:
                receive.cancel()
                break
            message = receive.result()
            if message["type"] == "websocket.disconnect":
                break
            if message.get("bytes") is not None:
                await conn.error("binary_not_supported", "send JSON text frames")
                continue
            await conn.handle_frame(message.get("text") or "")
        if worker.done() and worker.exception() is None:
            await ws.close(code=CLOSE_GOING_AWAY if state.shutting_down else 1000)
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        if not worker.done():
            worker.cancel()
        state.live_connections.discard(conn)
        if conn.session is not None:
            state.sessions.release(conn.session)
            state.sessions.drop(conn.session.session_id, owner)
