"""The Host allow-list (``--allowed-hosts``): which names clients may reach the server by.

Why: a page on ``evil.example`` can make its own name resolve to 127.0.0.1 (DNS rebinding)
and then talk to a server on loopback as "same origin": the browser sends ``Host:
evil.example``, and the Origin check (``app.api.http.origins``) sees the page's origin equal to
the host it asked for. A server only reachable on loopback has no keys in the common case,
so that page could open ``/v1/live``. Checking ``Host`` against the names the server is
meant to be reached by closes that; it applies to HTTP and WebSocket alike.

Default (no ``--allowed-hosts``): a server bound to a loopback address answers to loopback
names only (``localhost``, ``127.0.0.1``, ``[::1]``, any port); a server bound to another
address (a deployment, usually behind a gateway) answers to any name, and its operator
names its public hosts with ``--allowed-hosts`` to get the same protection.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether the bind address ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_allowed_hosts(bind_host: str) -> list[str]:
    return [*LOOPBACK_NAMES, "*.localhost"] if is_loopback(bind_host) else ["*"]


def host_name(header: str) -> str:
    """``Example.org:8000`` -> ``example.org``; ``[::1]:8000`` -> ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:
        return header.split(":", 1)[0]
    return header


def host_matches(name: str, patterns: Iterable[str]) -> bool:
    """Exact names, ``*.domain`` for its subdomains, ``*`` for any."""
    for pattern in patterns:
        pattern = pattern.strip().lower()
        if pattern == "*" or name == host_name(pattern):
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class AllowedHosts:
    """ASGI middleware: a request whose Host is not allowed gets a 400 in OpenAI's error
    shape; a WebSocket handshake is refused (HTTP 403, before it is accepted)."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = allowed
        self.any = "*" in allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.any or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        raw = dict(scope.get("headers") or []).get(b"host", b"")
        name = host_name(raw.decode("latin-1"))
        if name and host_matches(name, self.allowed):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "host not allowed"})
            return
        body = json.dumps({"error": {
            "message": "This server does not answer to that host name (Host header); its "
                       "operator can allow it with --allowed-hosts.",
            "type": "invalid_request_error", "param": None, "code": "invalid_host"}}).encode()
        await send({"type": "http.response.start", "status": 400, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
