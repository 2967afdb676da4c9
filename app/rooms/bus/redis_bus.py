"""The room bus on Redis (``serve --room-bus redis://host:port/db`` or a Sentinel URL).

What lives in Redis, all under one prefix and all bounded:

- ``{p}:owner:{room}``: the room's owner, the talk as JSON, with a lease (``--room-lease-s``)
  the owning replica renews every third of it on a connection of its own (a crowd of
  viewers on the shared pool cannot delay a renewal). ``SET NX`` makes one speaker per room
  across replicas; a replica that dies stops renewing and the room is free once the lease
  runs out, when the other replicas also end its viewers' talk.
- ``{p}:finals:{room}``: a stream per room (``XADD MAXLEN ~``) carrying each talk's start,
  its final captions and its end. Every replica with viewers of the room reads it from the
  last entry it handed on (``XREAD BLOCK``), so after a dropped connection, a Redis
  restart, a failover or a stretch of error replies it resumes exactly where it was: a
  final is replayed, never only broadcast. A late viewer's ``recent`` finals come from the
  same stream. Each final has a stable id (talk, segment, language): a write retried after
  a timeout that had in fact run is not appended twice (``{p}:sent:{room}:{talk}``), and a
  replica hands each final to its viewers once.
- ``{p}:partials:{room}``: a short stream of partial captions (at most once: a partial is
  replaced by the next one anyway; one older than its segment's final is skipped).
- ``{p}:epoch``: written when a replica starts; if Redis loses its data (a restart without
  persistence) it is gone, and claims wait one lease so that the replicas running talks
  take their rooms back first (and announce their talks again) instead of a rival speaker
  being given a room mid-talk.

A replica reads only the streams of rooms that have viewers on it: its cost grows with its
own viewers' rooms, not with the event. Writes go through an ``Outbox``: the speaker never
waits for Redis; every Redis failure, error replies included (``app.rooms.redis_client``), keeps
finals and talk starts and ends waiting until Redis takes them, in order. Every background
task runs under a ``Supervisor``: a bug is logged, counted and the task restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from app.rooms.bus.base import BusUnavailable, RoomListener, RoomTakenOnBus, TalkInfo
from app.rooms.outbox import Outbox, StoreUnavailable, Write
from app.rooms.redis_client import (
    ReplicaWait,
    connect,
    describe,
    is_sentinel,
    redacted,
    unavailable,
)
from app.supervision import Supervisor, reraise_lost_cancel, wait_event

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
RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)

# Append an entry unless its marker says it is there already (a retry of a write that ran).
# XADD first: under OOM the script fails before anything is written.
# KEYS: stream, sent-set. ARGV: marker ('' = none), maxlen, ttl ms, field, value, ...
_APPEND = """
if ARGV[1] ~= '' and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[1] ~= '' then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return 1
"""
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
# Redis stalled (every replica beats every third of a lease, so a beat older than
# ARGV[stale] means nobody could reach it, or it stood still: SIGSTOP, a long fork, a
# swap storm): while it stood, leases ran out on its clock that their owners could not
# renew. Claims then wait one lease, as after a data loss, so the owners take their rooms
# back first. KEYS[2]: epoch, KEYS[3]: beat. Sets ``stalled`` to 1 when it opened the wait.
_STALL = """
local stalled = 0
local beat = redis.call('GET', KEYS[3])
if beat and now - tonumber(beat) > tonumber(ARGV[3]) then
  redis.call('SET', KEYS[2], now)
  stalled = 1
end
redis.call('SET', KEYS[3], now)
"""
# Claim a room. KEYS: owner, epoch, beat. ARGV: value, lease ms, stale ms. 1 taken (or ours
# already: a retry), 0 owned by another, -N: claims wait N ms more (Redis lost its data or
# stalled a moment ago: owners take their rooms back first).
_CLAIM = _NOW + _STALL + """
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end  -- a retry of a claim that ran
local epoch = redis.call('GET', KEYS[2])
if not epoch then redis.call('SET', KEYS[2], now) return -tonumber(ARGV[2]) end
local left = tonumber(ARGV[2]) - (now - tonumber(epoch))
if left > 0 then return -left end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
# A replica's heartbeat (each lease round, rooms or none). KEYS: owner (unused), epoch,
# beat. ARGV: -, -, stale ms.
_BEAT = _NOW + _STALL + "return stalled"
# Renew our lease. KEYS: owner, epoch. ARGV: value, lease ms, '1' to take the room again
# when the lease ran out ('0' for a talk being released: its release may just have landed).
# 1 renewed, 2 taken again (it had run out, or Redis lost it), 3 gone (not taken again),
# 0 another replica's now.
_RENEW = _NOW + """
if not redis.call('GET', KEYS[2]) then redis.call('SET', KEYS[2], now) end
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if v then return 0 end
if ARGV[3] ~= '1' then return 3 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 2
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def probe(url: str, timeout: float = 3.0) -> None:
    """Raise ``BusUnavailable`` (one line) unless Redis at ``url`` answers a PING: checked
    by ``serve`` before it starts, so a wrong address is not found by the first speaker."""
    from app.rooms.redis_client import probe as ping

    try:
        ping(url, timeout)
    except (RuntimeError, ValueError) as exc:
        raise BusUnavailable(f"room bus {exc}") from None


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


class RedisBus:
    shared = True

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
        self._claim = self.client.register_script(_CLAIM)
        self._beat = self._lease_client.register_script(_BEAT)
        self._renew = self._lease_client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)
        self._append = self.client.register_script(_APPEND)

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

    # -- life ----------------------------------------------------------------------------
    async def start(self, listener: RoomListener) -> None:
        self.listener = listener
        try:
            await self.client.set(self._epoch, 0, nx=True)
            # a starting replica is no sign of a stall: its first beat opens no wait
            await self.client.set(self._beat_key, int(time.time() * 1000))
        except Exception as exc:  # noqa: BLE001 - any failure here: the server cannot start
            raise BusUnavailable(f"room bus {redacted(self.url)}: {describe(exc)}") from None
        self.supervisor.spawn("room-bus-outbox", self.outbox.run)
        self.supervisor.spawn("room-bus-reader", self._read_streams)
        self.supervisor.spawn("room-bus-leases", self._keep_leases)

    async def close(self, grace_s: float) -> None:
        """Write what waits (finals, talk ends) for up to ``grace_s``, then disconnect."""
        if not await self.outbox.drain(grace_s):
            log.error("room bus: %d writes not made at shutdown (Redis away)",
                      len(self.outbox))
        await self.supervisor.stop()
        for client in (self.client, self._lease_client, self._read_client,
                       self._binary_client):
            if client is None:
                continue
            with contextlib.suppress(Exception):
                await client.aclose()

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

    # -- ownership -----------------------------------------------------------------------
    async def claim(self, talk: TalkInfo) -> None:
        """Own ``talk.room`` for ``talk`` (``RoomTakenOnBus`` when another talk has it).
        Right after Redis lost its data or stood still, claims wait (at most a lease and a
        half) for the owners to take their rooms back, then are made: a rival is told the
        room is taken, not that the bus is away. A claim whose answer never came may still
        have run: it is released (in the outbox, in order), so it cannot hold the room."""
        value = json.dumps(talk.as_dict())
        keys = [self._owner(talk.room), self._epoch, self._beat_key]
        deadline = time.monotonic() + self.lease_ms * 1.5 / 1000 + 1.0
        while True:
            try:
                async with self._lookups:
                    taken = int(await self._claim(keys=keys,
                                                  args=[value, self.lease_ms, self._stale_ms]))
            except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
                self._settle_claim(talk.room, value)
                raise BusUnavailable(f"room bus unavailable: {describe(exc)}") from None
            if taken >= 0:
                break
            wait_s = min(-taken / 1000, deadline - time.monotonic())
            if wait_s <= 0:
                raise BusUnavailable("room bus: Redis lost its data or stalled a moment ago; "
                                     "rooms that were running are being taken back first")
            await asyncio.sleep(wait_s + 0.05)
        if taken == 0:
            raise RoomTakenOnBus(f"room '{talk.room}' already has a speaker")
        self.owned[talk.room] = Lease(talk, value)
        self._announce(talk, "start")

    def _settle_claim(self, room: str, value: str) -> None:
        """A claim that failed on the way may have run in Redis (a timeout after it was
        sent): free the room if it holds that claim, so it does not block the room for a
        lease or take it from a talk whose owner comes back."""
        async def free() -> None:
            await self._release(keys=[self._owner(room)], args=[value])

        self._put(free, keep=True, what="unanswered claim's release")

    def _announce(self, talk: TalkInfo, marker: str) -> None:
        fields = {"k": "start", "talk": talk.talk_id, "replica": self.instance,
                  "info": json.dumps(talk.as_dict())}
        if marker != "start":
            fields["again"] = "1"  # a talk announced again: its first start is older
        self._append_entry(talk.room, talk.talk_id, marker, fields, what="talk start")

    def release(self, talk: TalkInfo) -> asyncio.Future[None] | None:
        """Free the room and end its talk for other replicas' viewers; never waits. The
        future completes when Redis has it (a caller may wait, bounded: a next speaker on
        another replica can claim the room only then)."""
        lease = self.owned.get(talk.room)
        if lease is None or lease.talk.talk_id != talk.talk_id or lease.releasing:
            return None
        lease.releasing = True  # renewed until the release lands: see ``Lease``
        fields = {"k": "end", "talk": talk.talk_id, "replica": self.instance}
        # the end entry first: a rival who takes the room at once finds the old talk over
        self._append_entry(talk.room, talk.talk_id, "end", fields, what="talk end")

        async def free() -> None:
            await self._release(keys=[self._owner(talk.room)], args=[lease.value])

        done = self._put(free, keep=True, what="room release", wait=True)
        assert done is not None

        def released(_: asyncio.Future[None]) -> None:
            if self.owned.get(talk.room) is lease:
                del self.owned[talk.room]

        done.add_done_callback(released)
        return done

    # -- frames --------------------------------------------------------------------------
    def caption(self, talk: TalkInfo, payload: dict[str, Any], text: str) -> None:
        """One caption frame of a talk this replica runs, for other replicas' viewers.
        Never waits. Finals are kept until Redis takes them; partials may be lost."""
        lang = str(payload.get("lang", ""))
        segment = payload.get("segment")
        segment = segment if isinstance(segment, int) else -1
        fields = {"k": "caption", "talk": talk.talk_id, "replica": self.instance,
                  "lang": lang, "segment": str(segment), "frame": text}
        if payload.get("final"):
            self._append_entry(talk.room, talk.talk_id, f"{lang}:{segment}", fields,
                               what="final caption")
            return

        async def write() -> None:
            await self._append(keys=[self._partials(talk.room), self._sent(talk.room, "-")],
                               args=["", PARTIALS_MAXLEN, STREAM_TTL_S * 1000,
                                     *_flat(fields)])

        self._put(write, keep=False, what="partial caption", size=len(text))

    def _append_entry(self, room: str, talk: str, marker: str, fields: dict[str, str], *,
                      what: str, wait: bool = False) -> asyncio.Future[None] | None:
        """An entry in the room's finals stream, once (``marker`` names it in its talk)."""
        args = [marker, FINALS_MAXLEN, STREAM_TTL_S * 1000, *_flat(fields)]

        async def write() -> None:
            append = lambda: self._append(  # noqa: E731
                keys=[self._finals(room), self._sent(room, talk)], args=args)
            if self._replicas is None:
                await append()
            else:
                await self._replicas.write(self.client, append)

        return self._put(write, keep=True, what=what, wait=wait,
                         size=sum(len(v) for v in fields.values()))

    # -- viewers -------------------------------------------------------------------------
    async def current_talk(self, room: str) -> TalkInfo | None:
        try:
            async with self._lookups:
                value = await self.client.get(self._owner(room))
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise BusUnavailable(f"room bus unavailable: {describe(exc)}") from None
        return _talk_info(value)

    async def follow(self, room: str) -> None:
        """Read ``room``'s streams from now on, its running talk and that talk's finals so
        far handed to the listener first (the room's ``recent``). Returns once that is
        done, so a viewer joining right after sees each final exactly once: in ``recent``
        or in its queue. ``BusUnavailable`` when Redis cannot be read."""
        listener = self.listener
        assert listener is not None, "start() first"
        while True:
            if room in self.follows and listener.wants(room):
                return
            loading = self._loading.get(room)
            if loading is None:
                break
            await asyncio.shield(loading)
        loading = asyncio.get_running_loop().create_future()
        self._loading[room] = loading
        try:
            follow, backlog = await self._read_backlog(room)
            self._start_following(room, follow, backlog)
        finally:
            del self._loading[room]
            loading.set_result(None)

    async def _read_backlog(self, room: str) -> tuple[Follow, list[tuple[str, dict]]]:
        """Where the streams end now, and the entries of the talk that owns the room (oldest
        first, its start first) unless it has ended. The owner key says which talk runs:
        another talk's entries in the stream (an old talk's end flushed late by a replica
        that lost its lease, a rival's) neither hide it nor end it."""
        try:
            async with self._lookups:
                pipe = self.client.pipeline(transaction=False)
                pipe.xrevrange(self._partials(room), count=1)
                pipe.get(self._owner(room))
                last_partial, owner = await pipe.execute()
                current = _talk_info(owner)
                last_id, entries = await self._talk_entries(room, current)
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise BusUnavailable(f"room bus unavailable: {describe(exc)}") from None
        follow = Follow(finals_cursor=last_id,
                        partials_cursor=last_partial[0][0] if last_partial else "0-0")
        return follow, entries

    async def _talk_entries(self, room: str, talk: TalkInfo | None,
                            ) -> tuple[str, list[tuple[str, dict]]]:
        """The id of the room's last stream entry, and ``talk``'s entries from its first
        start, oldest first; none when the talk has ended (or there is none). A start that
        is not within the bound (``MAXLEN`` trimmed it in an all-day talk, or the owner's
        start is still on its way) is made from the owner key's record of the talk, so a
        late viewer follows it all the same."""
        key = self._finals(room)
        found: list[tuple[str, dict]] = []
        upper, last_id, scanned, first_start = "+", "0-0", 0, False
        while scanned < FINALS_MAXLEN * 2 and talk is not None and not first_start:
            batch = await self.client.xrevrange(key, max=upper, min="-", count=SCAN_BATCH)
            if not batch:
                break
            if scanned == 0:
                last_id = batch[0][0]
            for entry_id, fields in batch:
                if not isinstance(fields, dict) or fields.get("talk") != talk.talk_id:
                    continue  # another talk's (an old one's late end, a rival's)
                if fields.get("k") == "end":
                    return last_id, []
                found.append((entry_id, fields))
                if fields.get("k") == "start" and not fields.get("again"):
                    first_start = True
                    break
            scanned += len(batch)
            upper = "(" + batch[-1][0]
            if len(batch) < SCAN_BATCH:
                break
        if talk is None:
            last = await self.client.xrevrange(key, count=1)
            return (last[0][0] if last else "0-0"), []
        found.reverse()
        if not any(f.get("k") == "start" for _, f in found):
            found.insert(0, ("0-0", {"k": "start", "talk": talk.talk_id, "replica": "",
                                     "info": json.dumps(talk.as_dict())}))
        return last_id, found

    def _start_following(self, room: str, follow: Follow,
                         backlog: list[tuple[str, dict]]) -> None:
        """Hand the running talk and its finals so far to the listener, then read on from
        the end of the stream (no await in between: nothing slips in or comes twice)."""
        for _entry_id, fields in backlog:
            self._apply_final(room, follow, fields, create=True)
        self.follows[room] = follow
        self._wake.set()

    async def _read_streams(self) -> None:
        """Hand the followed rooms' entries to the listener, from where each left off."""
        failures = 0
        while True:
            rooms = self._rooms_to_read()
            if not rooms:
                self._wake.clear()
                await wait_event(self._wake, 5.0)
                continue
            asked = {room: self.follows[room] for room in rooms}
            streams: dict[str, str] = {}
            for room, follow in asked.items():
                streams[self._finals(room)] = follow.finals_cursor
                streams[self._partials(room)] = follow.partials_cursor
            try:
                replies = await self._read_client.xread(streams, count=READ_COUNT,
                                                        block=READ_BLOCK_MS)
            except Exception as exc:  # noqa: BLE001 - unavailable, or a bug to restart on
                reraise_lost_cancel()  # a cancel that met the socket timeout reads as one
                if "WRONGTYPE" in str(exc)[:40]:
                    await self._set_aside_unreadable(asked)
                    continue
                if not unavailable(exc):
                    raise
                self._set_up("reads", False, describe(exc))
                await asyncio.sleep(RETRY_S[min(failures, len(RETRY_S) - 1)])
                failures += 1
                continue
            failures = 0
            self._set_up("reads", True)
            for stream, entries in replies or []:
                self._deliver(str(stream), entries, asked)

    def _rooms_to_read(self) -> list[str]:
        """Followed rooms that still have viewers here (the others are dropped) and whose
        streams can be read."""
        listener = self.listener
        for room in [r for r in self.follows if listener is None or not listener.wants(r)]:
            del self.follows[room]
        now = time.monotonic()
        return [room for room, follow in self.follows.items()
                if follow.unreadable_until <= now]

    async def _set_aside_unreadable(self, asked: dict[str, Follow]) -> None:
        """One room's key is not a stream (another client wrote it): that room is skipped
        for a while, every other room is read on. One bad key must not silence them all."""
        pipe = self._read_client.pipeline(transaction=False)
        for room in asked:
            pipe.type(self._finals(room))
            pipe.type(self._partials(room))
        kinds = await pipe.execute()
        for i, follow in enumerate(asked.values()):
            if any(k not in ("stream", "none") for k in kinds[2 * i:2 * i + 2]):
                follow.unreadable_until = time.monotonic() + 10.0
                self._skipped(TypeError("a room's stream key holds another type"))

    def _deliver(self, stream: str, entries: list, asked: dict[str, Follow]) -> None:
        finals_head, partials_head = f"{self.prefix}:finals:", f"{self.prefix}:partials:"
        partial = stream.startswith(partials_head)
        room = stream[len(partials_head if partial else finals_head):]
        follow = asked.get(room)
        if follow is None or self.follows.get(room) is not follow:
            return  # followed anew since the read began: its backlog has these
        if partial:
            newest: dict[str, dict] = {}
            for entry_id, fields in entries:
                if _stream_id(entry_id) <= _stream_id(follow.partials_cursor):
                    continue
                follow.partials_cursor = entry_id
                newest[str(fields.get("lang", ""))] = fields  # older ones are superseded
            for fields in newest.values():
                self._apply_partial(room, follow, fields)
            return
        for entry_id, fields in entries:
            # the reader and a lease check's catch-up may both read an entry: once
            if _stream_id(entry_id) <= _stream_id(follow.finals_cursor):
                continue
            follow.finals_cursor = entry_id
            self._apply_final(room, follow, fields, create=False)

    def _apply_final(self, room: str, follow: Follow, fields: Any, *, create: bool) -> None:
        """One entry of a room's finals stream. Anything another client could have written
        there is data: an entry of the wrong shape is skipped and counted."""
        listener = self.listener
        try:
            if not isinstance(fields, dict) or listener is None:
                raise TypeError("not a field map")
            kind, talk = fields.get("k"), str(fields.get("talk", ""))
            if fields.get("replica") == self.instance:
                return  # our own talk: our viewers had it already
            if kind == "start":
                info = TalkInfo.from_dict(json.loads(fields["info"]))
                if follow.talk != info.talk_id:
                    follow.talk, follow.delivered, follow.last_final = info.talk_id, set(), {}
                listener.remote_start(room, info.talk_id, info.replica, list(info.langs),
                                      info.started_at, create=create)
            elif kind == "caption":
                lang, segment = str(fields["lang"]), int(fields["segment"])
                if talk != follow.talk or (lang, segment) in follow.delivered:
                    return
                frame = str(fields["frame"])
                payload = json.loads(frame)
                if not isinstance(payload, dict):
                    raise TypeError("frame is not an object")
                if len(follow.delivered) >= MAX_DELIVERED:
                    follow.delivered.clear()
                follow.delivered.add((lang, segment))
                follow.last_final[lang] = max(segment, follow.last_final.get(lang, -1))
                listener.remote_caption(room, talk, payload, frame)
            elif kind == "end":
                listener.remote_end(room, talk)
            else:
                raise ValueError("unknown kind")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._skipped(exc)

    def _apply_partial(self, room: str, follow: Follow, fields: Any) -> None:
        listener = self.listener
        try:
            if not isinstance(fields, dict) or listener is None:
                raise TypeError("not a field map")
            if fields.get("replica") == self.instance:
                return
            talk, lang = str(fields["talk"]), str(fields["lang"])
            segment = int(fields["segment"])
            if talk != follow.talk or segment <= follow.last_final.get(lang, -1):
                return  # an old talk's, or its segment's final is out already
            frame = str(fields["frame"])
            payload = json.loads(frame)
            if not isinstance(payload, dict) or payload.get("final"):
                raise TypeError("frame is not a partial caption")
            listener.remote_caption(room, talk, payload, frame)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._skipped(exc)

    def _skipped(self, exc: Exception) -> None:
        self.skipped += 1
        if self._on_skipped is not None:
            self._on_skipped()
        if self.skipped == 1 or self.skipped % 1000 == 0:
            log.warning("room bus: %d foreign or malformed entries skipped (latest: %s)",
                        self.skipped, type(exc).__name__)

    # -- leases --------------------------------------------------------------------------
    async def _keep_leases(self) -> None:
        """Beat, renew our rooms' leases, and end remote talks whose owner is gone (its
        replica died and its lease ran out)."""
        every = max(self.lease_ms / 3000, 0.2)
        while True:
            await asyncio.sleep(every)
            try:
                await self._heartbeat()
                await self._renew_owned()
                await self._check_remote()
            except Exception as exc:  # noqa: BLE001 - unavailable, or a bug to restart on
                reraise_lost_cancel()
                if not unavailable(exc) and not isinstance(exc, BusUnavailable):
                    raise
                self._set_up("leases", False, describe(exc))
                continue
            self._set_up("leases", True)

    async def _heartbeat(self) -> None:
        """Tell Redis this replica reaches it; the first beat after Redis stood still
        makes claims wait a lease (``_STALL``)."""
        stalled = int(await self._beat(keys=[self._owner(""), self._epoch, self._beat_key],
                                       args=["", self.lease_ms, self._stale_ms]))
        if stalled:
            log.warning("room bus: Redis stood still longer than %.1f s; new claims wait a "
                        "lease while running talks take their rooms back",
                        self._stale_ms / 1000)

    async def _renew_owned(self) -> None:
        for room, lease in list(self.owned.items()):
            retake = "0" if lease.releasing else "1"
            result = int(await self._renew(keys=[self._owner(room), self._epoch],
                                           args=[lease.value, self.lease_ms, retake]))
            if self.owned.get(room) is not lease:
                continue  # released meanwhile
            if result == 0:
                del self.owned[room]
                if lease.releasing:
                    continue  # the talk is over here anyway; its end is on its way
                # room names are client text: never in a log line
                log.error("room bus: a room this replica ran is another replica's now "
                          "(its lease ran out); its speaker is told")
                if self.listener is not None:
                    self.listener.lease_lost(room, lease.talk.talk_id)
            elif result == 2:
                self._retakes += 1
                log.warning("room bus: a room taken again after its lease ran out or Redis "
                            "lost it; its talk is announced again")
                self._announce(lease.talk, f"start:{self._retakes}")

    async def _check_remote(self) -> None:
        """A remote talk is over when its room is another talk's, or has had no owner for
        a whole lease (a dead replica); a moment without one (Redis restarted and the
        owner has not taken it back yet) is not the end. Before a talk is ended here, what
        its stream holds is handed on (``_catch_up``): its last finals come before
        ``ended``, however far behind the reader is."""
        listener = self.listener
        if listener is None:
            return
        now, followed = time.monotonic(), set()
        for room, talk_id in listener.remote_rooms():
            followed.add((room, talk_id))
            current = await self.current_talk(room)
            if current is not None and current.talk_id == talk_id:
                self._missing.pop((room, talk_id), None)
                continue
            since = self._missing.setdefault((room, talk_id), now)
            if current is not None or now - since >= self.lease_ms / 1000:
                await self._catch_up(room)
                log.info("room bus: a talk on another replica is over (its room is another "
                         "talk's or its lease ran out)")
                self._missing.pop((room, talk_id), None)
                listener.remote_end(room, talk_id)
        for key in [k for k in self._missing if k not in followed]:
            del self._missing[key]

    async def _catch_up(self, room: str) -> None:
        """Hand on every entry of ``room``'s finals stream past where this replica is (the
        reader may be a read behind): each is handed on once (``_deliver`` skips what is
        behind a follow's cursor), whoever reads it first."""
        follow = self.follows.get(room)
        key = self._finals(room)
        while follow is not None and self.follows.get(room) is follow:
            async with self._lookups:
                entries = await self.client.xrange(key, min=f"({follow.finals_cursor}",
                                                   max="+", count=READ_COUNT)
            if not entries:
                return
            self._deliver(key, entries, {room: follow})
            if len(entries) < READ_COUNT:
                return

    # -- writes --------------------------------------------------------------------------
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


def _stream_id(entry_id: Any) -> tuple[int, int]:
    """A stream entry id (``ms-seq``) as a comparable pair; anything else sorts first."""
    ms, _, seq = str(entry_id).partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return -1, -1


def _flat(fields: dict[str, str]) -> list[str]:
    return [item for pair in fields.items() for item in pair]


def _talk_info(value: Any) -> TalkInfo | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
        return TalkInfo.from_dict(data) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


__all__ = ["RedisBus", "aioredis", "probe"]
