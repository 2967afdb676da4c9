"""The room bus on Redis (``serve --room-bus redis://host:port/db``).

What lives in Redis, all under one prefix and all bounded:

- ``{p}:owner:{room}``: the room's owner, the talk as JSON, with a lease (``--room-lease-s``)
  the owning replica renews every third of it. ``SET NX`` makes one speaker per room across
  replicas; a replica that dies stops renewing and the room is free once the lease runs out,
  when the other replicas also end its viewers' talk. A compare-and-delete releases it.
- ``{p}:recent:{room}:{talk}:{lang}``: a talk's recent finals per language (``RECENT_FINALS``,
  a day's expiry), what a viewer joining on any replica gets in ``joined``.
- ``{p}:room:{room}``: a pub/sub channel per room carrying the talk's start, its caption
  frames (encoded once by the speaker's replica) and its end. Every replica listens to all
  rooms' channels (one pattern subscription), so no replica has to know in advance which
  rooms its viewers will want.

Writes go through an ``Outbox``: the speaker never waits for Redis, a lost Redis costs
other replicas' viewers their frames until it returns, and finals (with talk starts and
ends) wait and are written when it does. A viewer joining on another replica subscribes
(the pattern is always on) before it reads the recent finals, so a final is either in that
list or arrives after it; one that is in both is skipped by its segment number.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.bus.base import BusUnavailable, RoomListener, RoomTakenOnBus, TalkInfo
from app.outbox import Outbox, StoreUnavailable, Write

log = logging.getLogger("livetrans.bus")

RECENT_FINALS = 50
RECENT_TTL_S = 24 * 3600
DOWN_ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)

# renew our lease; take the key again if Redis lost it (a restart without persistence)
_RENEW = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def redacted(url: str) -> str:
    """The URL without a password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return scheme + sep + rest


MAX_CONNECTIONS = 32  # to Redis per replica: the subscription, the outbox, viewers' lookups
POOL_WAIT_S = 10.0  # a lookup waits this long for a free connection, then is "unavailable"


def connect(url: str) -> aioredis.Redis:
    """A client on a bounded pool that waits for a free connection: hundreds of viewers
    joining at once share a few connections instead of each opening one (which, on a busy
    machine, ran into the connect timeout and refused viewers while Redis was fine)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT_S, decode_responses=True,
        socket_connect_timeout=2, socket_timeout=5, health_check_interval=15)
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose closes it


def probe(url: str, timeout: float = 3.0) -> None:
    """Raise ``BusUnavailable`` (one line) unless Redis at ``url`` answers a PING: checked
    by ``serve`` before it starts, so a wrong address is not found by the first speaker."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        raise BusUnavailable(f"room bus {redacted(url)}: {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]}") from None
    finally:
        client.close()


class RedisBus:
    shared = True

    def __init__(self, url: str, replica: str, *, lease_s: float = 10.0,
                 prefix: str = "livetrans", on_up: Callable[[bool], None] | None = None,
                 on_error: Callable[[], None] | None = None,
                 on_pending: Callable[[int], None] | None = None) -> None:
        self.url, self.replica, self.prefix = url, replica, prefix
        self.lease_ms = int(lease_s * 1000)
        self.client = connect(url)
        self.outbox = Outbox(f"room bus {redacted(url)}", on_up=on_up, on_error=on_error,
                             on_pending=on_pending)
        self.owned: dict[str, tuple[TalkInfo, str]] = {}  # room -> (talk, owner value)
        self.listener: RoomListener | None = None
        self._tasks: list[asyncio.Task] = []
        self._renew = self.client.register_script(_RENEW)
        self._release = self.client.register_script(_RELEASE)

    # -- keys ----------------------------------------------------------------------------
    def _owner(self, room: str) -> str:
        return f"{self.prefix}:owner:{room}"

    def _recent(self, room: str, talk: str, lang: str) -> str:
        return f"{self.prefix}:recent:{room}:{talk}:{lang}"

    def _channel(self, room: str) -> str:
        return f"{self.prefix}:room:{room}"

    # -- life ----------------------------------------------------------------------------
    async def start(self, listener: RoomListener) -> None:
        self.listener = listener
        try:
            await self.client.ping()
        except DOWN_ERRORS as exc:
            raise BusUnavailable(f"room bus {redacted(self.url)}: {exc}") from None
        subscribed = asyncio.Event()
        self._tasks = [asyncio.create_task(self.outbox.run()),
                       asyncio.create_task(self._listen(subscribed)),
                       asyncio.create_task(self._keep_leases())]
        await asyncio.wait_for(subscribed.wait(), 10)

    async def close(self, grace_s: float) -> None:
        """Write what waits (finals, talk ends) for up to ``grace_s``, then disconnect."""
        if not await self.outbox.drain(grace_s):
            log.error("room bus: %d writes not made at shutdown (Redis away)",
                      len(self.outbox))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self.client.aclose()

    # -- ownership -----------------------------------------------------------------------
    async def claim(self, talk: TalkInfo) -> None:
        value = json.dumps(talk.as_dict())
        try:
            taken = await self.client.set(self._owner(talk.room), value, nx=True,
                                          px=self.lease_ms)
        except DOWN_ERRORS as exc:
            raise BusUnavailable(f"room bus unavailable: {exc}") from None
        if not taken:
            raise RoomTakenOnBus(f"room '{talk.room}' already has a speaker")
        self.owned[talk.room] = (talk, value)
        message = json.dumps({"k": "start", "replica": self.replica, "talk": talk.talk_id,
                              "info": talk.as_dict()})
        self._put(lambda: self.client.publish(self._channel(talk.room), message),
                  keep=True, what="talk start")

    def release(self, talk: TalkInfo) -> asyncio.Future[None] | None:
        """Free the room and end its talk for other replicas' viewers; never waits. The
        future completes when Redis has it (a caller may wait, bounded: a next speaker on
        another replica can claim the room only then)."""
        owned = self.owned.get(talk.room)
        if owned is None or owned[0].talk_id != talk.talk_id:
            return None
        del self.owned[talk.room]
        message = json.dumps({"k": "end", "replica": self.replica, "talk": talk.talk_id})

        async def write() -> None:
            await self._release(keys=[self._owner(talk.room)], args=[owned[1]])
            await self.client.publish(self._channel(talk.room), message)

        return self._put(write, keep=True, what="talk end", wait=True)

    # -- frames --------------------------------------------------------------------------
    def caption(self, talk: TalkInfo, payload: dict[str, Any], text: str) -> None:
        """One caption frame of a talk this replica runs, for other replicas' viewers (and,
        when final, the recent list). Never waits."""
        final = bool(payload.get("final"))
        lang = str(payload.get("lang", ""))
        message = json.dumps({"k": "caption", "replica": self.replica, "talk": talk.talk_id,
                              "frame": text})

        async def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            if final:
                key = self._recent(talk.room, talk.talk_id, lang)
                pipe.rpush(key, text)
                pipe.ltrim(key, -RECENT_FINALS, -1)
                pipe.expire(key, RECENT_TTL_S)
            pipe.publish(self._channel(talk.room), message)
            await pipe.execute()

        self._put(write, keep=final, what="final caption" if final else "partial caption")

    async def current_talk(self, room: str) -> TalkInfo | None:
        try:
            value = await self.client.get(self._owner(room))
        except DOWN_ERRORS as exc:
            raise BusUnavailable(f"room bus unavailable: {exc}") from None
        if value is None:
            return None
        try:
            return TalkInfo.from_dict(json.loads(value))
        except (ValueError, KeyError, TypeError):
            return None

    async def recent(self, talk: TalkInfo, lang: str) -> list[dict[str, Any]]:
        try:
            items = await self.client.lrange(self._recent(talk.room, talk.talk_id, lang), 0, -1)
        except DOWN_ERRORS as exc:
            raise BusUnavailable(f"room bus unavailable: {exc}") from None
        frames = []
        for item in items:
            with contextlib.suppress(ValueError):
                frames.append(json.loads(item))
        return frames

    # -- tasks ---------------------------------------------------------------------------
    def _put(self, write: Callable[[], Awaitable[Any]], *, keep: bool, what: str,
             wait: bool = False) -> asyncio.Future[None] | None:
        async def run() -> None:
            try:
                await write()
            except DOWN_ERRORS as exc:
                raise StoreUnavailable(str(exc)) from None

        done = asyncio.get_running_loop().create_future() if wait else None
        self.outbox.put(Write(run, keep, what, done))
        return done

    async def _listen(self, subscribed: asyncio.Event) -> None:
        """Hand other replicas' frames to this replica's rooms; resubscribe after an outage."""
        pattern = f"{self.prefix}:room:*"
        down = False
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(pattern)
                subscribed.set()
                if down:
                    log.warning("room bus: listening again")
                    down = False
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._dispatch(message)
            except DOWN_ERRORS as exc:
                if not down:
                    log.error("room bus: lost the subscription (%s); retrying", exc)
                    down = True
                subscribed.set()  # start-up goes on; the retry loop gets it back
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    def _dispatch(self, message: dict[str, Any]) -> None:
        listener = self.listener
        channel = str(message.get("channel", ""))
        head = f"{self.prefix}:room:"
        if listener is None or not channel.startswith(head):
            return
        room = channel[len(head):]
        try:
            data = json.loads(message["data"])
            if data.get("replica") == self.replica:
                return  # our own talk: our viewers had it already
            kind, talk = data.get("k"), str(data.get("talk"))
            if kind == "caption":
                frame = data["frame"]
                listener.remote_caption(room, talk, json.loads(frame), frame)
            elif kind == "start":
                info = TalkInfo.from_dict(data["info"])
                listener.remote_start(room, info.talk_id, info.replica, list(info.langs),
                                      info.started_at)
            elif kind == "end":
                listener.remote_end(room, talk)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("room bus: a malformed message ignored (%s)", type(exc).__name__)

    async def _keep_leases(self) -> None:
        """Renew our rooms' leases; end remote talks whose owner is gone (its replica died
        and its lease ran out)."""
        every = max(self.lease_ms / 3000, 0.2)
        while True:
            await asyncio.sleep(every)
            try:
                await self._renew_owned()
                await self._check_remote()
            except (*DOWN_ERRORS, BusUnavailable):
                continue  # the outbox logs the outage; a remote talk is not ended for it

    async def _renew_owned(self) -> None:
        for room, (_talk, value) in list(self.owned.items()):
            result = await self._renew(keys=[self._owner(room)], args=[value, self.lease_ms])
            if result == 0:
                # room names are client text: never in a log line
                log.error("room bus: a room this replica runs is owned by another replica "
                          "now (its lease ran out); its captions reach only this replica")
            elif result == 2:
                log.warning("room bus: a room taken again after Redis lost it")

    async def _check_remote(self) -> None:
        listener = self.listener
        if listener is None:
            return
        for room, talk_id in listener.remote_rooms():
            current = await self.current_talk(room)
            if current is None or current.talk_id != talk_id:
                log.info("room bus: a talk on another replica is over (its lease ran out)")
                listener.remote_end(room, talk_id)

