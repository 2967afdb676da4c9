"""The pending work of one live connection: every final, in order, and the newest partial.

A speaker's ASR sends partials faster than a CPU translates them; only the newest partial
of a connection is worth translating (older ones are coalesced away), while every final
is kept in order: nothing the speaker said is lost. ``room`` is set whenever a final
leaves, which is what the reader's backpressure waits on.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Update:
    segment: int
    text: str
    final: bool
    received: float = field(default_factory=time.perf_counter)
    # a recognised final: where its time went before it was translated (its caption's
    # ``stats.speech``, ``app.live.audio.speech_stats``)
    speech: dict[str, Any] | None = None
    # a partial heard at a pause in the speech: likely the final's text, so it is
    # translated as the final will be (``app.translation.pause``)
    pause: bool = False


class SegmentQueue:
    """Pending work of one connection: ordered finals plus at most one newest partial."""

    def __init__(self) -> None:
        self.finals: deque[Update] = deque()
        self.partial: Update | None = None
        self.coalesced = 0
        self.changed = asyncio.Event()
        self.room = asyncio.Event()  # set whenever a final leaves the queue

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
            self.room.set()
            return self.finals.popleft()
        update, self.partial = self.partial, None
        return update

    def clear(self) -> list[Update]:
        """Empty the queue: its finals, in order, for the caller to answer (the partial
        is dropped; nothing waits for it)."""
        finals = list(self.finals)
        self.finals.clear()
        self.partial = None
        self.room.set()
        return finals
