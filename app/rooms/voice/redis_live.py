"""The room voice's live feed on Redis (``live_feed`` has the contract): the speaking
replica appends each piece to a stream per room and language; every replica with
listeners reads the streams it follows.

Keys, under the bus's prefix: ``{p}:voicelive:{room}:{lang}``, a stream of pieces (``t``:
the talk, ``p``: ``live_feed.pack_piece``), capped at about ``KEEP_PIECES`` entries and
expiring ``EXPIRY_S`` after the last one (a live feed is for now; the HLS segments are
the record).

One reader per replica: a single ``XREAD BLOCK`` over every followed stream, so a replica
holds one Redis connection for its listeners however many rooms and languages they
follow (the bus's pool stays for the writes). The block is short (``BLOCK_MS``), so a new
subscription is read within it. A Redis that cannot be reached is retried every second,
logged once per outage; listeners hear silence meanwhile, then the feed from where it
stands (what they missed is in the HLS rendition).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis

from app.rooms.redis_client import describe, unavailable
from app.rooms.voice.live_feed import LivePiece, Subscribers, pack_piece, unpack_piece
from app.rooms.voice.track import VoicePiece
from app.supervision import reraise_lost_cancel, wait_event

log = logging.getLogger("livetrans.rooms")

KEEP_PIECES = 120  # about 30 s of pieces per room and language
EXPIRY_S = 300
BLOCK_MS = 250
RETRY_S = 1.0


class RedisVoiceLive:
    def __init__(self, client: aioredis.Redis, prefix: str = "livetrans") -> None:
        self.client = client
        self.prefix = prefix
        self.subscribers = Subscribers()
        self.positions: dict[tuple[str, str], str] = {}  # last id read per followed key
        self._reader: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self.down = False  # Redis away (logged once per outage)

    def _key(self, room: str, lang: str) -> str:
        return f"{self.prefix}:voicelive:{room}:{lang}"

    async def put(self, room: str, lang: str, talk: str, piece: VoicePiece) -> None:
        """Append a piece (the track logs a failure and goes on)."""
        key = self._key(room, lang)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"t": talk, "p": pack_piece(piece)}, maxlen=KEEP_PIECES,
                      approximate=True)
            pipe.expire(key, EXPIRY_S)
            await pipe.execute()

    def follow(self, room: str, lang: str) -> AsyncIterator[LivePiece]:
        pieces = self.subscribers.follow(room, lang)
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read())
        self._wake.set()
        return pieces

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def _read(self) -> None:
        while True:
            keys = self.subscribers.keys()
            for gone in set(self.positions) - set(keys):
                del self.positions[gone]
            if not keys:
                self._wake.clear()
                await wait_event(self._wake, 5.0)  # keeps a cancel 3.11 may lose
                continue
            try:
                await self._read_once(keys)
                if self.down:
                    log.info("room voice live feed: Redis is back")
                    self.down = False
            except Exception as exc:  # noqa: BLE001 - Redis away; a bug is raised below
                # ``close``'s cancel, met by redis-py's read timeout, reads as an error:
                # retrying on it read on forever and ``close`` waited for good (CI hung)
                reraise_lost_cancel()
                if not unavailable(exc):
                    log.error("room voice live feed: reader failed (%s)", describe(exc),
                              exc_info=exc)
                elif not self.down:
                    log.warning("room voice live feed: Redis away (%s); retrying",
                                describe(exc))
                self.down = True
                await asyncio.sleep(RETRY_S)

    async def _read_once(self, keys: list[tuple[str, str]]) -> None:
        for key in keys:
            if key not in self.positions:  # from now on: the stream's newest entry
                newest = await self.client.xrevrange(self._key(*key), count=1)
                self.positions[key] = _text(newest[0][0]) if newest else "0-0"
        names = {self._key(*key): key for key in keys}
        streams: dict[Any, Any] = {name: self.positions[key] for name, key in names.items()}
        answer = await self.client.xread(streams, count=64, block=BLOCK_MS)
        for name, entries in answer or []:
            key = names.get(_text(name))
            if key is None:
                continue
            for entry_id, fields in entries:
                self.positions[key] = _text(entry_id)
                talk, data = fields.get(b"t"), fields.get(b"p")
                if talk is None or data is None:
                    continue
                try:
                    piece = unpack_piece(bytes(data))
                except Exception:  # noqa: BLE001 - a foreign entry: skipped
                    continue
                self.subscribers.dispatch(key[0], key[1], LivePiece(_text(talk), piece))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
