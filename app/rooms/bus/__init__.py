"""Rooms across replicas: the room bus (``app.rooms.bus.base``), in process or on Redis."""

from __future__ import annotations

from collections.abc import Callable

from app.rooms.bus.base import BusUnavailable, RoomBus, RoomTakenOnBus, TalkInfo
from app.rooms.bus.local import LocalBus

__all__ = ["BusUnavailable", "RoomBus", "RoomTakenOnBus", "TalkInfo", "open_room_bus"]


def open_room_bus(url: str | None, replica: str, *, lease_s: float = 10.0,
                  on_up: Callable[[bool], None] | None = None,
                  on_error: Callable[[], None] | None = None,
                  on_pending: Callable[[int], None] | None = None,
                  on_restart: Callable[[str], None] | None = None,
                  on_skipped: Callable[[], None] | None = None) -> RoomBus:
    """The bus ``serve --room-bus`` names: None is this process only."""
    if url is None:
        return LocalBus()
    from app.rooms.bus.redis_bus import RedisBus

    return RedisBus(url, replica, lease_s=lease_s, on_up=on_up, on_error=on_error,
                    on_pending=on_pending, on_restart=on_restart, on_skipped=on_skipped)
