"""One access line per WebSocket connection, in the format of the HTTP access line.

uvicorn logs a WebSocket in its own format, in pieces ('"WebSocket /v1/live" [accepted]',
"connection open", "connection closed") without the request id; ``app.logs`` drops those,
and this middleware writes one line when the connection ends: its route template (never
the raw path or query, which carry room names and keys), how it ended and how long it
lasted, under the connection's request id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from asgi_correlation_id import correlation_id
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("livetrans.server")


class WebSocketEnd:
    """How a WebSocket connection ended, from the ASGI messages that passed."""

    def __init__(self) -> None:
        self.accepted = False
        self.server_code: int | None = None  # the close code the server sent
        self.client_code: int | None = None  # the code of a client's disconnect
        self.http_status: int | None = None  # a handshake answered with an HTTP response

    def sent(self, message: Message) -> None:
        kind = message["type"]
        if kind == "websocket.accept":
            self.accepted = True
        elif kind == "websocket.close" and self.server_code is None:
            self.server_code = int(message.get("code", 1000))
        elif kind == "websocket.http.response.start":
            self.http_status = int(message["status"])

    def received(self, message: Message) -> None:
        if message["type"] == "websocket.disconnect" and self.client_code is None:
            self.client_code = int(message.get("code", 1000))

    def describe(self) -> str:
        if self.http_status is not None:
            return str(self.http_status)
        if not self.accepted:
            return "403 (refused before the handshake)"
        if self.server_code is not None:
            return f"closed {self.server_code}"
        if self.client_code is not None:
            return f"client closed {self.client_code}"
        return "ended"


class WebSocketAccessLog:
    """ASGI middleware: HTTP passes through; each WebSocket gets one line at its end."""

    def __init__(self, app: ASGIApp, label: Callable[[Scope], str]) -> None:
        self.app = app
        self.label = label

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        end = WebSocketEnd()
        t0 = time.perf_counter()

        async def receive_noted() -> Message:
            message = await receive()
            end.received(message)
            return message

        async def send_noted(message: Message) -> None:
            end.sent(message)
            await send(message)

        try:
            await self.app(scope, receive_noted, send_noted)
        finally:
            log.info("request_id=%s WS %s -> %s (%.1f s)", correlation_id.get(),
                     self.label(scope), end.describe(), time.perf_counter() - t0)
