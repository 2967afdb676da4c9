"""Server addresses as users type them, checked once and turned into the URLs the clients
open: the HTTP API root, the WebSocket of the live route, a room's caption screen."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from app.usage import UsageError

_SCHEMES = {"http://": "ws://", "https://": "wss://", "ws://": "ws://", "wss://": "wss://"}
_HTTP_OF = {"http": "http", "https": "https", "ws": "http", "wss": "https"}


LOCAL_SERVER = "http://127.0.0.1:8000"


def default_server() -> str:
    """``LIVETRANS_SERVER`` when set (the server a user works against), else the local
    default of ``livetrans serve``: client commands then need no ``--server`` at all."""
    return os.environ.get("LIVETRANS_SERVER", "").strip() or LOCAL_SERVER


def http_url(server: str) -> str:
    """``http://host:8000`` (or ``ws://...``, ``https://...``, a bare ``host:8000``) as the
    server's HTTP root without a trailing slash; anything else is a one-line ``UsageError``.

    A typo (``ftp://``, ``htp//host``, a port that is no number) would otherwise surface
    as a connection error far from its cause, or as a traceback.
    """
    text = server.strip()
    parts = urlsplit(text if "://" in text else "http://" + text)
    scheme = _HTTP_OF.get(parts.scheme.lower())
    hint = "give it as http://HOST:PORT (or https://, ws://, wss://)"
    if scheme is None:
        raise UsageError(f"server address {server!r}: unsupported scheme "
                         f"{parts.scheme + '://'!r}; {hint}")
    try:
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise UsageError(f"server address {server!r}: the port is not a number 0-65535; "
                         f"{hint}") from None
    host = parts.hostname or ""
    if not host or any(c.isspace() for c in host) or parts.query or parts.fragment:
        raise UsageError(f"server address {server!r} is not an address; {hint}")
    netloc = parts.netloc.rsplit("@", 1)[-1]  # no credentials in the address
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def live_url(server: str) -> str:
    """``http://host:8000`` (or ``ws://...``, or a bare ``host:8000``) -> ``ws://host:8000/v1/live``.

    Users copy the server's HTTP address from its log line or the README; a WebSocket client
    that insisted on ``ws://`` would fail with a traceback on exactly that.
    """
    base = http_url(server)
    ws = "wss://" if base.startswith("https://") else "ws://"
    return ws + base.split("://", 1)[1] + "/v1/live"


def watch_url(server: str, room: str, lang: str, token: str | None = None) -> str:
    """The caption screen of ``room`` in ``lang`` on ``server``, as a viewer opens it."""
    from urllib.parse import urlencode

    query = {"room": room, "lang": lang, **({"token": token} if token else {})}
    return f"{http_url(server)}/watch?{urlencode(query)}"
