"""The room bus: what replicas share about rooms (API.md "Events").

One replica runs a room's talk (its speaker's connection); viewers may be on any replica.
The bus carries what the others need: who owns a room (a lease, so a dead replica frees
its rooms), each talk's caption frames for their viewers, the recent finals a late viewer
gets in ``joined``. ``LocalBus`` is the default, one process: the room registry alone is
the truth and the bus does nothing. ``RedisBus`` shares it through Redis.

The bus talks to this replica's room registry through ``RoomListener`` (rooms of talks on
other replicas, which rooms have viewers here, a speaker whose room was lost), so it
imports nothing above it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import redis.asyncio


class BusUnavailable(RuntimeError):
    """The bus cannot be reached now (start-up: the server refuses to start)."""


class RoomTakenOnBus(RuntimeError):
    """Another replica's speaker owns the room."""


@dataclass(frozen=True)
class TalkInfo:
    """A talk as the bus knows it: which room, which talk, where and in which languages."""

    room: str
    talk_id: str
    replica: str
    langs: tuple[str, ...]
    started_at: float  # unix seconds

    def as_dict(self) -> dict[str, Any]:
        return {"room": self.room, "talk": self.talk_id, "replica": self.replica,
                "langs": list(self.langs), "started_at": self.started_at}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TalkInfo:
        return cls(room=str(data["room"]), talk_id=str(data["talk"]),
                   replica=str(data["replica"]),
                   langs=tuple(str(x) for x in data["langs"]),
                   started_at=float(data["started_at"]))


class RoomListener(Protocol):
    """This replica's rooms, as the bus updates them (``app.rooms.registry.RoomRegistry``)."""

    def remote_start(self, name: str, talk_id: str, replica: str, langs: list[str],
                     started_at: float, *, create: bool = False) -> object: ...

    def remote_caption(self, name: str, talk_id: str, payload: dict[str, Any],
                       text: str) -> None: ...

    def remote_end(self, name: str, talk_id: str) -> None: ...

    def remote_rooms(self) -> list[tuple[str, str]]: ...

    def wants(self, name: str) -> bool:
        """Whether this replica has viewers of ``name`` to hand remote frames to."""
        ...

    def lease_lost(self, name: str, talk_id: str) -> None:
        """Another replica owns the room of this replica's talk ``talk_id`` now."""
        ...


class RoomBus(Protocol):
    shared: bool  # False: one replica, the registry knows everything
    # the bus's Redis client (the transcript store shares it; the bus closes it), None for
    # a bus without Redis
    redis: redis.asyncio.Redis | None

    async def start(self, listener: RoomListener) -> None: ...

    async def close(self, grace_s: float) -> None: ...

    async def claim(self, talk: TalkInfo) -> None: ...

    def release(self, talk: TalkInfo) -> asyncio.Future[None] | None:
        """Free the room; never waits. A future when the release lands later (it
        completes once made or given up), None when it is already done."""

    def caption(self, talk: TalkInfo, payload: dict[str, Any], text: str) -> None: ...

    async def current_talk(self, room: str) -> TalkInfo | None: ...

    async def follow(self, room: str) -> None:
        """Make sure this replica receives ``room``'s frames from other replicas: the room's
        running talk, with its finals so far, is in the listener when this returns."""
