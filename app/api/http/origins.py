"""Which browser origins may use the API: CORS for HTTP, the same rule for WebSockets.

Default: no cross-origin access at all; the server's own pages (``/live``) are same-origin
and need none. ``--cors-origin`` names the origins allowed, ``*`` allows any. Credentials
(cookies, HTTP auth) are never allowed cross-origin: the API authenticates with an
``Authorization`` header the page sets itself, which needs no credentials mode, and ``*``
combined with credentials would let any site act with a visitor's cookies.

Browsers do not apply CORS to WebSockets: they send ``Origin`` and connect anyway, so the
WebSocket routes must check it themselves with ``origin_allowed``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from app.settings import Settings

_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def cors_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for Starlette's ``CORSMiddleware``."""
    return {
        "allow_origins": list(settings.http.cors_origins),
        "allow_credentials": False,
        "allow_methods": ["GET", "POST", "OPTIONS"],
        "allow_headers": ["*"],
        "expose_headers": ["x-request-id", "x-livetrans-replica"],
    }


def origin_allowed(conn: HTTPConnection, settings: Settings) -> bool:
    """May the page at the connection's ``Origin`` use this server?

    True without an ``Origin`` header (not a browser: curl, SDKs, the caption client), for
    the server's own origin (``Origin`` names the host the request was sent to, so the
    bundled ``/live`` page works with no CORS setting), and for the configured CORS origins
    (``*``: any). Scheme and host compare case-insensitively, default ports are implied.
    ``conn`` is a ``Request`` or a ``WebSocket``.
    """
    origin = conn.headers.get("origin")
    if origin is None:
        return True
    if "*" in settings.http.cors_origins:
        return True
    key = _origin_key(origin)
    if key is None:
        return False  # "null" (a file or sandboxed page) or garbage
    if any(key == _origin_key(allowed) for allowed in settings.http.cors_origins):
        return True
    return key == _origin_key(f"{key[0]}://{conn.headers.get('host', '')}")


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with the scheme's default port filled in; None if malformed."""
    try:
        parts = urlsplit(origin.strip().lower())
        default = _DEFAULT_PORTS.get(parts.scheme)
        if default is None or not parts.hostname:
            return None
        return parts.scheme, parts.hostname, parts.port or default
    except ValueError:  # a malformed port
        return None
