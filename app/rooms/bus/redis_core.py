"""What every part of the room bus on Redis shares (``app.rooms.bus.redis_bus``): its
clients, its state (the rooms it owns, the rooms it reads), the keys, whether each part
answers, and the outbox every write goes through. The parts (``redis_leases``: rooms this
replica owns; ``redis_reader``: rooms its viewers follow) build on it, so each reads as one
concern while the bus stays one object with one set of connections.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from app.rooms.bus.base import RoomListener, TalkInfo
from app.rooms.bus.redis_scripts import APPEND, BEAT, CLAIM, RELEASE, RENEW
from app.rooms.outbox import Outbox, StoreUnavailable, Write
from app.rooms.redis_client import (
    ReplicaWait,
    connect,
    describe,
    is_sentinel,
    redacted,
    unavailable,
)
from app.supervision import Supervisor

log = logging.getLogger("livetrans.bus")

FINALS_MAXLEN = 20_000  # entries per room's stream (talk starts, finals, ends), approximate
PARTIALS_MAXLEN = 256
STREAM_TTL_S = 24 * 3600  # a room's streams expire a day after their last entry
READ_BLOCK_MS = 250  # a reader's XREAD waits this long (a new room joins the next read)
READ_COUNT = 512
SCAN_BATCH = 500  # entries per XREVRANGE while a late viewer's backlog is read
MAX_CONNECTIONS = 32  # to Redis per replica: outbox writes, viewers' lookups
LOOKUPS_AT_ONCE = 24  # viewers' lookups in flight; the rest wait their turn
MAX_DELIVERED = 200_000  # finals a replica remembers per room to hand each on once


@dataclass(eq=False)
class Lease:
    """A room this replica owns on the bus: the talk, the owner key's value, and whether
    the talk has ended and its end and release wait in the outbox. A releasing lease is
    still renewed while it is ours (never taken again once gone, never announced again):
    the room stays the talk's until its last finals and its end are in the stream, so other
    replicas never end it ahead of them."""

    talk: TalkInfo
    value: str
    releasing: bool = False


@dataclass(eq=False)
class Follow:
    """A room this replica reads: where it is in the room's two streams, and the talk."""

    finals_cursor: str
    partials_cursor: str
    talk: str | None = None
    delivered: set[tuple[str, int]] = field(default_factory=set)  # (lang, segment)
    last_final: dict[str, int] = field(default_factory=dict)  # lang -> newest final's segment
    unreadable_until: float = 0.0  # a key another client made no stream: skipped a while


class RedisBusCore:
    """The bus's connections and state; ``RedisBus`` is this plus its parts."""

    def __init__(self, url: str, replica: str, *, lease_s: float = 10.0,
                 prefix: str = "livetrans", on_up: Callable[[bool], None] | None = None,
                 on_error: Callable[[], None] | None = None,
                 on_pending: Callable[[int], None] | None = None,
                 on_restart: Callable[[str], None] | None = None,
                 on_skipped: Callable[[], None] | None = None) -> None:
        self.url, self.replica, self.prefix = url, replica, prefix
        # names this process in messages: a restarted replica's old talk is not "ours"
        self.instance = f"{replica}#{secrets.token_hex(4)}"
        self.lease_ms = int(lease_s * 1000)
        self.client = connect(url, max_connections=MAX_CONNECTIONS)
        self._binary_client: aioredis.Redis | None = None  # ``binary_redis``
        self._lease_client = connect(url, max_connections=2)  # renewals never queue
        self._read_client = connect(url, max_connections=2,  # XREAD BLOCK holds one
                                    extra_timeout=READ_BLOCK_MS / 1000)
        # with Sentinel (replicas): kept writes wait for a replica's copy
        self._replicas = ReplicaWait("room bus") if is_sentinel(url) else None
        self.outbox = Outbox(f"room bus {redacted(url)}", on_up=self._writes_up,
                             on_error=on_error, on_pending=on_pending)
        self.supervisor = Supervisor(on_restart)
        self.owned: dict[str, Lease] = {}
        self.follows: dict[str, Follow] = {}
        self._loading: dict[str, asyncio.Future[None]] = {}
        self._missing: dict[tuple[str, str], float] = {}  # remote talk -> owner missing since
        self._retakes = 0
        self.listener: RoomListener | None = None
        self._lookups = asyncio.Semaphore(LOOKUPS_AT_ONCE)
        self._wake = asyncio.Event()
        self._up = {"writes": True, "reads": True, "leases": True}
        self._on_up, self._on_error, self._on_skipped = on_up, on_error, on_skipped
        self.skipped = 0  # foreign or malformed entries skipped
        self._claim = self.client.register_script(CLAIM)
        self._beat = self._lease_client.register_script(BEAT)
        self._renew = self._lease_client.register_script(RENEW)
        self._release = self.client.register_script(RELEASE)
        self._append = self.client.register_script(APPEND)

    @property
    def redis(self) -> aioredis.Redis:
        """The bus's main client: the transcript store shares it (the bus closes it)."""
        return self.client

    @property
    def binary_redis(self) -> aioredis.Redis:
        """A client that hands bytes back as they are (the room voice's audio segments,
        ``app.rooms.voice.redis_segments``), made at first use; the bus closes it."""
        if self._binary_client is None:
            self._binary_client = connect(self.url, max_connections=MAX_CONNECTIONS,
                                          decode=False)
        return self._binary_client

    # -- keys ----------------------------------------------------------------------------
    def _owner(self, room: str) -> str:
        return f"{self.prefix}:owner:{room}"

    def _finals(self, room: str) -> str:
        return f"{self.prefix}:finals:{room}"

    def _partials(self, room: str) -> str:
        return f"{self.prefix}:partials:{room}"

    def _sent(self, room: str, talk: str) -> str:
        return f"{self.prefix}:sent:{room}:{talk}"

    @property
    def _epoch(self) -> str:
        return f"{self.prefix}:epoch"

    @property
    def _beat_key(self) -> str:
        return f"{self.prefix}:beat"

    @property
    def _stale_ms(self) -> int:
        """A heartbeat older than this means Redis stood still (replicas beat every third
        of a lease)."""
        return self.lease_ms * 2 // 3

    # -- health and writes ---------------------------------------------------------------
    def _set_up(self, part: str, up: bool, why: str = "") -> None:
        """One part (writes, reads, leases) answers or not; one log line per change."""
        if self._up[part] == up:
            return
        self._up[part] = up
        if part != "writes":  # the outbox logs its own outages
            if up:
                log.warning("room bus: %s work again", part)
                self.outbox.poke()  # Redis is back: waiting finals go now
            else:
                log.error("room bus: %s fail (%s); retrying", part, why)
        if self._on_up is not None:
            self._on_up(all(self._up.values()))

    def _writes_up(self, up: bool) -> None:
        self._set_up("writes", up)

    def _append_entry(self, room: str, talk: str, marker: str, fields: dict[str, str], *,
                      what: str, wait: bool = False) -> asyncio.Future[None] | None:
        """An entry in the room's finals stream, once (``marker`` names it in its talk)."""
        args = [marker, FINALS_MAXLEN, STREAM_TTL_S * 1000, *flat(fields)]

        async def write() -> None:
            append = lambda: self._append(  # noqa: E731
                keys=[self._finals(room), self._sent(room, talk)], args=args)
            if self._replicas is None:
                await append()
            else:
                await self._replicas.write(self.client, append)

        return self._put(write, keep=True, what=what, wait=wait,
                         size=sum(len(v) for v in fields.values()))

    def _put(self, write: Callable[[], Awaitable[Any]], *, keep: bool, what: str,
             wait: bool = False, size: int = 0) -> asyncio.Future[None] | None:
        async def run() -> None:
            try:
                await write()
            except Exception as exc:  # noqa: BLE001 - sorted: "not now" or "never"
                if unavailable(exc):
                    raise StoreUnavailable(describe(exc)) from None
                raise

        done = asyncio.get_running_loop().create_future() if wait else None
        self.outbox.put(Write(run, keep, what, done, size=size))
        return done


def stream_id(entry_id: Any) -> tuple[int, int]:
    """A stream entry id (``ms-seq``) as a comparable pair; anything else sorts first."""
    ms, _, seq = str(entry_id).partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return -1, -1


def flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def talk_info(value: Any) -> TalkInfo | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
        return TalkInfo.from_dict(data) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError):
        return None
