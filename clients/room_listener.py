"""A WHEP listener of a room's voice (``POST /v1/rooms/{room}/voice/{lang}/whep``), with
aiortc: what a phone's page does, for scripts, the tests and ``bench room-voice``.

    async with RoomListener(base_url, room, "de", token=viewer_token) as listener:
        async for heard in listener.audio():   # HeardAudio: when, 48 kHz mono PCM16
            ...

The offer is receive-only audio; the answer's track is read until the listener is closed
(``DELETE`` its Location, then the peer closes). What came is timed on arrival
(``time.monotonic``), so a caller can say when a word was heard.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np


class ListenRefused(RuntimeError):
    """The server did not answer the offer: ``status`` and its OpenAI-shaped ``error``."""

    def __init__(self, status: int, error: dict[str, Any]) -> None:
        super().__init__(f"{status} {error.get('code')}: {error.get('message')}")
        self.status = status
        self.error = error


@dataclass(frozen=True)
class HeardAudio:
    at: float  # time.monotonic() when the frame arrived
    pcm: np.ndarray  # int16 mono
    rate: int


class RoomListener:
    def __init__(self, base_url: str, room: str, lang: str, *, token: str | None = None,
                 api_key: str | None = None, timeout_s: float = 30.0) -> None:
        query = f"?token={quote(token)}" if token else ""
        self.url = f"{base_url.rstrip('/')}/v1/rooms/{quote(room)}/voice/{quote(lang)}/whep"
        self.url += query
        self.base_url = base_url.rstrip("/")
        self.headers = {"Content-Type": "application/sdp"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout_s = timeout_s
        self.location: str | None = None
        self.pc: Any = None
        self.track: Any = None

    async def __aenter__(self) -> RoomListener:
        from aiortc import RTCPeerConnection, RTCSessionDescription

        self.pc = RTCPeerConnection()
        self.pc.addTransceiver("audio", direction="recvonly")
        arrived: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        @self.pc.on("track")
        def on_track(track: Any) -> None:
            if not arrived.done():
                arrived.set_result(track)

        await self.pc.setLocalDescription(await self.pc.createOffer())
        async with httpx.AsyncClient(timeout=self.timeout_s) as http:
            r = await http.post(self.url, content=self.pc.localDescription.sdp,
                                headers=self.headers)
        if r.status_code != 201:
            await self.pc.close()
            error = r.json().get("error", {}) if r.headers.get(
                "content-type", "").startswith("application/json") else {}
            raise ListenRefused(r.status_code, error)
        self.location = r.headers.get("location")
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=r.text, type="answer"))
        self.track = await asyncio.wait_for(arrived, self.timeout_s)
        return self

    async def audio(self) -> AsyncIterator[HeardAudio]:
        """The frames as they arrive (mono), until the listener or the server ends it."""
        from aiortc.mediastreams import MediaStreamError

        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await self.track.recv()
                data = frame.to_ndarray().reshape(-1)
                channels = len(frame.layout.channels)
                if channels > 1:
                    data = data.reshape(-1, channels).mean(axis=1).astype(np.int16)
                yield HeardAudio(time.monotonic(), data, frame.sample_rate)

    async def close(self) -> None:
        if self.location is not None:
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(timeout=self.timeout_s) as http:
                    await http.delete(self.base_url + self.location,
                                      headers={k: v for k, v in self.headers.items()
                                               if k == "Authorization"})
            self.location = None
        if self.pc is not None:
            await self.pc.close()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
