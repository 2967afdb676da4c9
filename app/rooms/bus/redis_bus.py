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
import logging
import time
from typing import Any

import redis.asyncio as aioredis

from app.rooms.bus.base import BusUnavailable, RoomListener, TalkInfo
from app.rooms.bus.redis_core import PARTIALS_MAXLEN, STREAM_TTL_S, flat
from app.rooms.bus.redis_leases import Leases
from app.rooms.bus.redis_reader import Reader
from app.rooms.redis_client import describe, redacted, unavailable
from app.supervision import reraise_lost_cancel

log = logging.getLogger("livetrans.bus")


def probe(url: str, timeout: float = 3.0) -> None:
    """Raise ``BusUnavailable`` (one line) unless Redis at ``url`` answers a PING: checked
    by ``serve`` before it starts, so a wrong address is not found by the first speaker."""
    from app.rooms.redis_client import probe as ping

    try:
        ping(url, timeout)
    except (RuntimeError, ValueError) as exc:
        raise BusUnavailable(f"room bus {exc}") from None


class RedisBus(Leases, Reader):
    """The room bus on Redis: the rooms it owns (``Leases``) and the rooms its viewers
    follow (``Reader``), over the connections and state they share (``RedisBusCore``);
    here, its life and the captions it writes."""

    shared = True

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
                                     *flat(fields)])

        self._put(write, keep=False, what="partial caption", size=len(text))


__all__ = ["RedisBus", "aioredis", "probe"]
