"""Writes a talk's finals to the transcript store without making the speaker wait.

The store may be SQLite on this machine or Redis on the room bus; either way a final goes
through an ``Outbox``: written in order, retried while the store is away (Redis lost
mid-talk), bounded. So a final acknowledged to the speaker reaches the transcript when
the store returns, and a slow disk or a dead Redis never holds up a caption.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from app.rooms.outbox import Outbox, StoreUnavailable, Write
from app.rooms.transcripts.store import (
    TalkRecord,
    TranscriptLine,
    TranscriptStore,
    TranscriptUnavailable,
)
from app.supervision import Supervisor

log = logging.getLogger("livetrans.transcripts")


class TranscriptRecorder:
    def __init__(self, store: TranscriptStore, *,
                 on_line: Callable[[], None] | None = None,
                 on_error: Callable[[], None] | None = None,
                 on_pending: Callable[[int], None] | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.on_line = on_line
        self.outbox = Outbox("transcript store", on_error=on_error, on_pending=on_pending)
        self.supervisor = Supervisor(on_restart)

    async def start(self) -> None:
        self.supervisor.spawn("transcript-writer", self.outbox.run)

    async def close(self, grace_s: float) -> None:
        """Write what waits for up to ``grace_s``, then close the store."""
        if not await self.outbox.drain(grace_s):
            log.error("transcripts: %d lines not written at shutdown (store away)",
                      len(self.outbox))
        await self.supervisor.stop()
        with contextlib.suppress(Exception):
            await self.store.close()

    def start_talk(self, talk: TalkRecord) -> None:
        self._put(lambda: self.store.start_talk(talk), "talk start")

    def line(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None:
        async def write() -> None:
            await self.store.add(room, talk_id, lang, line)
            if self.on_line is not None:
                self.on_line()

        self._put(write, "transcript line", len(line.source) + len(line.text))

    def written(self) -> asyncio.Future[None]:
        """Completes once every line recorded so far is in the store (or given up)."""
        return self.outbox.barrier()

    def _put(self, write: Callable[[], Awaitable[None]], what: str, size: int = 0) -> None:
        async def run() -> None:
            try:
                await write()
            except TranscriptUnavailable as exc:
                raise StoreUnavailable(str(exc)) from None

        self.outbox.put(Write(run, keep=True, what=what, size=size))
