"""The room voice's live feed: short pieces of a room's voice, from the replica that speaks
to the replicas whose listeners want it now (WHEP listeners, ``app.live.room_listeners``).

HLS segments (``segments``) are seconds long and a player buffers several; a listener on a
phone wants the interpreter within a second. So the track (``track.RoomVoiceTrack``) also
sends each ``PIECE_S`` of its AAC stream as it is encoded, and every replica that has
listeners for a room and language follows that room's feed. A feed is per room and
language, not per talk: each piece names its talk, so a listener goes on with the room's
next talk without asking again (a talk's own viewer token hears only that talk).

Two homes, as for the segments: this process (``MemoryVoiceLive``) and Redis
(``redis_live.RedisVoiceLive``, every replica of a room bus). A feed is for now, not for
later: a subscriber gets pieces from the moment it subscribed, a slow one loses the
oldest (its queue is bounded), and nothing is kept beyond a short tail. What a listener
missed, the HLS rendition still has.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from app.rooms.voice.track import VoicePiece

QUEUE_PIECES = 64  # a subscriber's queue (16 s of pieces): past it the oldest go
_HEADER = struct.Struct("<d?")  # first_s, last


@dataclass(frozen=True)
class LivePiece:
    """A piece of a room's voice and the talk it belongs to."""

    talk: str
    piece: VoicePiece


def pack_piece(piece: VoicePiece) -> bytes:
    return _HEADER.pack(piece.first_s, piece.last) + piece.audio


def unpack_piece(data: bytes) -> VoicePiece:
    first_s, last = _HEADER.unpack_from(data)
    return VoicePiece(data[_HEADER.size:], first_s, last)


class VoiceLive(Protocol):
    async def put(self, room: str, lang: str, talk: str, piece: VoicePiece) -> None: ...

    def follow(self, room: str, lang: str) -> AsyncIterator[LivePiece]:
        """The room's pieces in ``lang`` from now on, until the caller stops iterating."""
        ...


class Subscribers:
    """Queues of the feed's subscribers per (room, lang): a bounded fan-out."""

    def __init__(self) -> None:
        self.queues: dict[tuple[str, str], set[asyncio.Queue[LivePiece]]] = {}
        self.lost = 0  # pieces a slow subscriber did not get

    def keys(self) -> list[tuple[str, str]]:
        return list(self.queues)

    def dispatch(self, room: str, lang: str, item: LivePiece) -> None:
        for queue in self.queues.get((room, lang), ()):
            if queue.full():
                queue.get_nowait()
                self.lost += 1
            queue.put_nowait(item)

    def follow(self, room: str, lang: str) -> AsyncIterator[LivePiece]:
        """Subscribed at once (a piece put from now on is kept for it); the caller
        iterates the result to its end or closes it (``aclose``), which unsubscribes."""
        queue: asyncio.Queue[LivePiece] = asyncio.Queue(QUEUE_PIECES)
        key = (room, lang)
        self.queues.setdefault(key, set()).add(queue)
        return self._drain(key, queue)

    async def _drain(self, key: tuple[str, str],
                     queue: asyncio.Queue[LivePiece]) -> AsyncIterator[LivePiece]:
        try:
            while True:
                yield await queue.get()
        finally:
            queues = self.queues.get(key)
            if queues is not None:
                queues.discard(queue)
                if not queues:
                    del self.queues[key]


class MemoryVoiceLive:
    """One replica's feed: pieces go straight to this process's subscribers."""

    def __init__(self) -> None:
        self.subscribers = Subscribers()

    async def put(self, room: str, lang: str, talk: str, piece: VoicePiece) -> None:
        self.subscribers.dispatch(room, lang, LivePiece(talk, piece))

    def follow(self, room: str, lang: str) -> AsyncIterator[LivePiece]:
        return self.subscribers.follow(room, lang)


async def close_iterator(it: AsyncIterator[LivePiece]) -> None:
    """End a ``follow`` (its subscription) from outside its loop."""
    with contextlib.suppress(Exception):
        await it.aclose()  # type: ignore[attr-defined]
