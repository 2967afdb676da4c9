"""WHIP ingest (RFC 9725): a WebRTC publisher, such as OBS, speaking into a room.

The feature in one place, so a change to it reads one folder:

- ``session.py``: the sessions, each driving a live connection through a socket with no
  network behind it (``WhipSessions``, ``WhipSocket``);
- ``sdp.py``: what aiortc sees of an offer, and the answer's shape (OpenAI's realtime calls
  use it too, through ``app.live.peer``);
- ``ice.py``: ICE sockets bound within ``--whip-udp-ports``;
- ``route.py``: ``POST /v1/rooms/{room}/whip`` and ``DELETE`` on its resource. It sits in
  the API layer (it uses the server state and the OpenAI shape of errors), so nothing here
  imports it: the server mounts it (tests/test_import_layers.py).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``from app.live.whip import WhipSessions`` (the server state's import), resolved on
    use: importing the session here eagerly would be a circle at run time, since
    ``app.live.peer`` imports ``sdp.py`` from this package and the session imports
    ``app.live.peer``. New code imports ``app.live.whip.session``."""
    if name == "WhipSessions":
        from app.live.whip.session import WhipSessions
        return WhipSessions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
