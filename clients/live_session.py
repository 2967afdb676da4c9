"""One speaker's session on ``WebSocket /v1/live``, for the clients and the benchmarks:
connect, ``start`` (its ``ready`` frame, or a refusal as ``LiveSessionRefused``), send text
updates or audio, read the server's frames as dicts, ``stop``.

    async with LiveSession(url) as live:
        ready = await live.start(target_langs=["de"])
        await live.send_update("final", "Hello world.", segment=0)
        frame = await live.recv()
        await live.stop()

The protocol itself (frames, codes) is the server's (docs/api.md); this class only carries it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import websockets


class LiveSessionRefused(RuntimeError):
    """The server answered ``start`` with something other than ``ready``."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self.frame = frame
        self.code = str(frame.get("code") or frame.get("type") or "refused")
        super().__init__(f"start refused: {self.code}: {frame.get('message', frame)}")


class LiveSession:
    """A ``/v1/live`` speaker connection. ``url`` is the WebSocket URL (``ws://host/v1/live``,
    with any query); ``api_key`` is sent as a bearer token."""

    def __init__(self, url: str, *, api_key: str | None = None,
                 open_timeout: float | None = 120) -> None:
        self.url = url
        self.api_key = api_key
        self.open_timeout = open_timeout
        self.ws: Any = None
        self.ready: dict[str, Any] | None = None

    async def connect(self) -> LiveSession:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else None
        self.ws = await websockets.connect(self.url, max_size=None,
                                           open_timeout=self.open_timeout,
                                           additional_headers=headers)
        return self

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def __aenter__(self) -> LiveSession:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(frame))

    async def start(self, **fields: Any) -> dict[str, Any]:
        """Send ``start`` with ``fields`` and return the ``ready`` frame; any other answer
        raises ``LiveSessionRefused``."""
        await self.send({"type": "start", **fields})
        frame = await self.recv()
        if frame.get("type") != "ready":
            raise LiveSessionRefused(frame)
        self.ready = frame
        return frame

    async def send_update(self, kind: str, text: str, segment: int = 0,
                          **fields: Any) -> None:
        """A ``partial`` or ``final`` of ``segment``."""
        await self.send({"type": kind, "segment": segment, "text": text, **fields})

    async def send_audio(self, pcm: bytes) -> None:
        """One binary frame of audio (16-bit PCM, as ``start`` announced it)."""
        await self.ws.send(pcm)

    async def stop(self) -> None:
        await self.send({"type": "stop"})

    async def recv(self, timeout: float | None = None) -> dict[str, Any]:
        """The next frame from the server, as a dict (``TimeoutError`` after ``timeout``)."""
        raw = await (self.ws.recv() if timeout is None
                     else asyncio.wait_for(self.ws.recv(), timeout))
        return json.loads(raw)

    async def frames(self) -> AsyncIterator[dict[str, Any]]:
        """Every frame until the server closes the socket."""
        async for raw in self.ws:
            yield json.loads(raw)

    async def until_done(self) -> list[dict[str, Any]]:
        """The frames up to and including ``done`` (after ``stop``), or to the close."""
        seen = []
        async for frame in self.frames():
            seen.append(frame)
            if frame.get("type") == "done":
                break
        return seen
