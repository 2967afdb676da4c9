"""Server addresses as users type them, turned into the WebSocket URL of the live route."""

from __future__ import annotations

_SCHEMES = {"http://": "ws://", "https://": "wss://", "ws://": "ws://", "wss://": "wss://"}


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
