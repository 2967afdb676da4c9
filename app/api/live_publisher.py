"""Where a live connection's frames leave: the speaker's own socket, and the room's viewers.

Every frame goes through ``send_text`` under one lock (the reader's error frames and the
translator's captions interleave whole). A caption is encoded once and the same text is
sent to the speaker and published to the room (``app.api.rooms``), which never waits for a
viewer. This is the one place captions leave a connection, so a room bus shared between
replicas plugs in here (``publish``), not in the translator or the reader.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import WebSocket

from app.api.live_frames import encode_frame
from app.api.rooms import Room, RoomRegistry


class ConnectionGone(Exception):
    """The client is gone (or the socket already closed): nothing more can be sent."""


class CaptionPublisher:
    def __init__(self, ws: WebSocket, rooms: RoomRegistry, owner: object) -> None:
        self.ws = ws
        self.rooms = rooms
        self.owner = owner  # the speaker, as the room registry knows it
        self.room: Room | None = None
        self.send_lock = asyncio.Lock()

    async def send(self, payload: dict[str, Any]) -> None:
        """Send one frame; it always encodes, and a closed socket raises ``ConnectionGone``."""
        await self.send_text(encode_frame(payload))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (``encode_frame``); a closed socket: ``ConnectionGone``."""
        async with self.send_lock:
            try:
                await self.ws.send_text(text)
            except Exception as exc:  # noqa: BLE001 - every send failure means the same
                raise ConnectionGone(type(exc).__name__) from exc

    async def error(self, code: str, message: str, *, segment: int | None = None,
                    final: bool = False, param: str | None = None,
                    lang: str | None = None) -> None:
        """An ``error`` frame; one about a segment names it and whether it answers a final,
        and, when one target language failed, which one."""
        payload: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if segment is not None:
            payload["segment"] = segment
            payload["final"] = final
        if lang is not None:
            payload["lang"] = lang
        if param is not None:
            payload["param"] = param
        await self.send(payload)

    async def caption(self, payload: dict[str, Any]) -> None:
        """A caption frame: to the room's viewers of its language (never waiting for one),
        then to the speaker."""
        text = encode_frame(payload)
        if self.room is not None:
            self.room.publish(payload["lang"], payload, text, payload["final"])
        await self.send_text(text)

    def end_room(self) -> None:
        """The talk is over (``done`` sent, or the speaker left): viewers get ``ended``."""
        if self.room is not None:
            self.rooms.release(self.room, self.owner)
            self.room = None
