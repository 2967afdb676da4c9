"""The default room bus: one process, where the room registry is all there is to share."""

from __future__ import annotations

import asyncio
from typing import Any

from app.rooms.bus.base import RoomListener, TalkInfo


class LocalBus:
    shared = False
    redis = None  # no Redis: transcripts go to SQLite
    binary_redis = None  # ... and room voices stay in this process

    async def start(self, listener: RoomListener) -> None:
        return None

    async def close(self, grace_s: float) -> None:
        return None

    async def claim(self, talk: TalkInfo) -> None:
        return None  # the registry's own claim is the only one

    def release(self, talk: TalkInfo) -> asyncio.Future[None] | None:
        return None  # nothing to wait for: the registry's release is immediate

    def caption(self, talk: TalkInfo, payload: dict[str, Any], text: str) -> None:
        return None

    async def current_talk(self, room: str) -> TalkInfo | None:
        return None  # a talk here is in the registry

    async def follow(self, room: str) -> None:
        return None  # every talk is in the registry
