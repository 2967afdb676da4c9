"""A request-body size limit, enforced before a body is read whole.

Starlette reads a JSON body into memory in one piece before validation sees it, so without
a limit a client can make the server hold any amount of memory (a 200 MB unknown field was
read whole: RSS 0.5 -> 1.1 GB, /health stalled meanwhile). This pure ASGI middleware answers
413 in OpenAI's error shape:

* at once, without reading anything, when ``Content-Length`` announces too much;
* as soon as the bytes received pass the limit, for a body without a length (chunked):
  the application's reads fail, whatever it answers is dropped, and the 413 goes out.

The 413 asks the client to close the connection (``Connection: close``): the rest of its
body was never read.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_body


class BodyTooLargeError(Exception):
    """Raised into the application when a streamed body passes the limit."""


def _payload(limit: int) -> bytes:
    return json.dumps(error_body(
        413, f"Request body too large; the limit is {limit} bytes.", param=None,
        code="body_too_large")).encode()


class BodySizeLimit:
    """ASGI middleware: HTTP request bodies of at most ``max_bytes`` bytes."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._reject(send)
            return
        received = 0
        exceeded = False
        response_started = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise BodyTooLargeError(f"request body passed {self.max_bytes} bytes")
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if exceeded:
                return  # the application's answer to a failed read: replaced by the 413
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
        if exceeded and not response_started:
            await self._reject(send)

    async def _reject(self, send: Send) -> None:
        body = _payload(self.max_bytes)
        await send({
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        })
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server rejects a malformed length itself
    return None
