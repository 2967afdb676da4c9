"""A leg: one ``/v1/live`` audio connection that a realtime session drives.

The live connection (``app.live.connection.serve``) runs as it does for any speaker, over
a ``LegSocket``: a ``SpeakerSocket`` with no network behind it, as WHIP's is. Its incoming
frames are the ``start`` the session composes, the client's 200 ms PCM frames and
``stop``; the frames it sends back (``ready``, captions, commits, errors, ``done``) are
handed to the session, which turns them into protocol events. A session changes legs when
its languages change: the old leg finishes what it heard, then the next one starts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from app.live.connection import serve
from app.live.services import LiveServices

QUEUE_FRAMES = 150  # 200 ms frames waiting for the live connection (30 s)

FrameHandler = Callable[["Leg", dict[str, Any]], Awaitable[None]]


class LegSocket:
    """The live connection's side of a leg (``SpeakerSocket``)."""

    def __init__(self, start: dict[str, Any], on_frame: Callable[[dict[str, Any]],
                                                                Awaitable[None]]) -> None:
        self.on_frame = on_frame
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.audio_frames = 0  # audio frames waiting in ``incoming``
        self.room = asyncio.Event()  # set when the connection took an audio frame
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(start)})

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        message = await self.incoming.get()
        if message.get("bytes") is not None:
            self.audio_frames -= 1
            self.room.set()
        return message

    async def send_text(self, data: str) -> None:
        await self.on_frame(json.loads(data))

    async def send_bytes(self, data: bytes) -> None:
        """A leg asks for no ``voices``: the session speaks commits itself (its own
        ``VoiceOut``, 24 kHz deltas), so no binary frame comes; one would be dropped."""
        return None

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        if self.close_code is None:
            self.close_code = code
        self.closed.set()
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})

    def push(self, pcm: bytes) -> None:
        self.audio_frames += 1
        self.incoming.put_nowait({"type": "websocket.receive", "bytes": pcm})

    def push_stop(self) -> None:
        self.incoming.put_nowait({"type": "websocket.receive",
                                  "text": json.dumps({"type": "stop"})})

    def disconnect(self) -> None:
        """The client left: the live connection ends as it does for a vanished speaker."""
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": 1001})


class Leg:
    """One live connection for one (output language, source language)."""

    def __init__(self, services: LiveServices, owner: str | None, output_language: str,
                 source_language: str, start_extra: dict[str, Any],
                 on_frame: FrameHandler, sample_rate: int) -> None:
        self.output_language = output_language
        self.source_language = source_language
        self.ready = False
        self.stopped = False
        start = {"type": "start", "input": "audio", "sample_rate": sample_rate,
                 "target_lang": output_language, "source_lang": source_language,
                 **start_extra}

        async def frame(payload: dict[str, Any]) -> None:
            if payload.get("type") == "ready":
                self.ready = True
            await on_frame(self, payload)

        self.socket = LegSocket(start, frame)
        self.task = asyncio.create_task(serve(self.socket, services, owner))

    async def push(self, pcm: bytes) -> None:
        """One frame to the live connection, waiting while ``QUEUE_FRAMES`` wait there
        (the session's own queue fills meanwhile, and it drops what overflows)."""
        while self.socket.audio_frames >= QUEUE_FRAMES and not self.task.done():
            self.socket.room.clear()
            room = asyncio.create_task(self.socket.room.wait())
            try:
                await asyncio.wait({room, self.task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                room.cancel()
        if not self.task.done():
            self.socket.push(pcm)

    def stop(self) -> None:
        """Finish: the segment in progress becomes a final, its text comes, then 'done'."""
        if not self.stopped:
            self.stopped = True
            self.socket.push_stop()

    async def finish(self) -> None:
        """Stop and wait until the live connection ended (everything it heard answered)."""
        self.stop()
        await asyncio.wait({self.task})
