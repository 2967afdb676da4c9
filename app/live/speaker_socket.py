"""What a speaker's connection needs of its socket: the seam between the live subsystem
and its transports.

Starlette's ``WebSocket`` is one (``WebSocket /v1/live``);
``app.live.whip.session.WhipSocket`` is another, with no network behind it (a WHIP
publisher's audio, framed as a live speaker's). Messages in are ASGI WebSocket messages
(``{"type": "websocket.receive", "text" | "bytes": ...}`` or ``{"type":
"websocket.disconnect"}``); frames out are the encoded JSON frames of API.md, and binary
frames of a connection's voices.
"""

from __future__ import annotations

from typing import Any, Protocol


class SpeakerSocket(Protocol):
    async def accept(self) -> None: ...

    async def receive(self) -> dict[str, Any]: ...

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...  # a voice's audio (API.md "Voices")

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...
