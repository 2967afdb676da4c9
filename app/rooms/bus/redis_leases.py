"""The rooms this replica owns on the Redis room bus (``app.rooms.bus.redis_bus``): a claim
(one speaker per room across replicas), the talk's announcement, its release, and the
renewal of each lease every third of it, with the heartbeat that tells when Redis stood
still. One concern: whether a room is ours, and for how long.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from app.rooms.bus.base import BusUnavailable, RoomTakenOnBus, TalkInfo
from app.rooms.bus.redis_core import Lease, RedisBusCore
from app.rooms.redis_client import describe

log = logging.getLogger("livetrans.bus")


class Leases(RedisBusCore):
    """Owning rooms: claim, announce, release, renew."""

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

    async def _heartbeat(self) -> None:
        """Tell Redis this replica reaches it; the first beat after Redis stood still
        makes claims wait a lease (``redis_scripts``' stall check)."""
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
