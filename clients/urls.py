"""Server addresses as users type them, turned into the WebSocket URL of the live route."""

from __future__ import annotations

import os

_SCHEMES = {"http://": "ws://", "https://": "wss://", "ws://": "ws://", "wss://": "wss://"}


LOCAL_SERVER = "http://127.0.0.1:8000"


def default_server() -> str:
    """``LIVETRANS_SERVER`` when set (the server a user works against), else the local
    default of ``livetrans serve``: client commands then need no ``--server`` at all."""
    return os.environ.get("LIVETRANS_SERVER", "").strip() or LOCAL_SERVER


def live_url(server: str) -> str:
    """``http://host:8000`` (or ``ws://...``, or a bare ``host:8000``) -> ``ws://host:8000/v1/live``.

    Users copy the server's HTTP address from its log line or the README; a WebSocket client
    that insisted on ``ws://`` would fail with a traceback on exactly that.
    """
    base = server.strip().rstrip("/")
    for prefix, ws in _SCHEMES.items():
        if base.startswith(prefix):
            return ws + base[len(prefix):] + "/v1/live"
    return "ws://" + base + "/v1/live"


def watch_url(server: str, room: str, lang: str, token: str | None = None) -> str:
    """The caption screen of ``room`` in ``lang`` on ``server``, as a viewer opens it."""
    from urllib.parse import urlencode

    base = server.strip().rstrip("/")
    for prefix, ws in _SCHEMES.items():
        if base.startswith(prefix):
            base = ("https://" if ws == "wss://" else "http://") + base[len(prefix):]
            break
    else:
        base = "http://" + base
    query = {"room": room, "lang": lang, **({"token": token} if token else {})}
    return f"{base}/watch?{urlencode(query)}"
