"""Where a live connection's frames leave: the speaker's own socket, and the talk's room.

Every frame goes through ``send_text`` under one lock (the reader's error frames and the
translator's captions interleave whole). A caption is encoded once; the same text goes to
the speaker and to the speaker's talk (``app.rooms.talk``), which hands it to the room's
viewers, the room bus and the transcript, never waiting for a viewer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from app.live.frames import encode_frame
from app.live.speaker_socket import SpeakerSocket
from app.rooms.talk import Talk
from app.translation.commits import Commit, CommitListener

log = logging.getLogger("livetrans.live")


class PushStats(Protocol):
    """The talk's pushes (``app.live.outputs.delivery.Pushes``), as a caption sees them."""

    def stats(self, lang: str) -> list[dict[str, Any]]: ...


class ConnectionGone(Exception):
    """The client is gone (or the socket already closed): nothing more can be sent."""


class CaptionPublisher:
    def __init__(self, ws: SpeakerSocket, talk: Talk | None = None) -> None:
        self.ws = ws
        self.talk = talk  # the speaker's talk; captions reach its room once it is open
        if talk is not None:
            talk.on_lost = self._room_lost
        self.send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()  # frames sent from outside a reader's turn
        self.pushes: PushStats | None = None  # set by 'start' when it names outputs
        # told of each commit (``app.live.commits``): a voice, the realtime API's deltas
        self.commit_listeners: list[CommitListener] = []

    def _room_lost(self) -> None:
        """The bus found this talk's room owned by another replica (Redis was away longer
        than the lease and a rival took it): the speaker hears it, not only the log."""
        async def tell() -> None:
            with contextlib.suppress(ConnectionGone):
                await self.error("room_lost", "this talk lost its room on the room bus (it "
                                 "was away longer than the lease and another speaker took "
                                 "the room); captions now reach this replica's viewers only")

        task = asyncio.get_running_loop().create_task(tell())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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

    async def send_bytes(self, data: bytes) -> None:
        """Send one binary frame (a voice's audio, ``app.live.voices``) under the same lock
        as text frames; a closed socket: ``ConnectionGone``."""
        async with self.send_lock:
            try:
                await self.ws.send_bytes(data)
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

    async def caption(self, payload: dict[str, Any]) -> None:
        """A caption frame: to the talk's room (never waiting for a viewer), then to the
        speaker. A final's ``stats`` carry its language's pushes so far (``outputs``)."""
        if self.pushes is not None and payload.get("final"):
            pushed = self.pushes.stats(str(payload.get("lang")))
            stats = payload.get("stats")
            if pushed and isinstance(stats, dict):
                stats["outputs"] = pushed
        text = encode_frame(payload)
        if self.talk is not None:
            self.talk.publish(payload, text)
        await self.send_text(text)

    async def commit(self, commit: Commit) -> None:
        """A ``commit`` frame (append-only text, ``app.translation.commit_policy``): to each commit
        listener in order (a voice, the realtime API), to the talk's room and to the
        speaker. The room gets it as a partial (``final`` false: no transcript line, never
        a final on the bus), so a viewer may miss one: each frame carries the whole
        committed ``text``, its ``delta`` is what it appends."""
        for listener in self.commit_listeners:
            try:
                listener.committed(commit)
            except Exception:  # noqa: BLE001 - a listener's bug must not cost the captions
                log.exception("commit listener failed")
        payload: dict[str, Any] = {"type": "commit", "segment": commit.segment,
                                   "lang": commit.lang, "text": commit.text,
                                   "delta": commit.delta}
        text = encode_frame(payload)
        if self.talk is not None:
            self.talk.publish({**payload, "final": False}, text)
        await self.send_text(text)
