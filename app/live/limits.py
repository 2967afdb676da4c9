"""Bounds of the live socket: frame size, connections, pending finals, room viewers.

A live connection is cheap while idle but holds a session (and so a slot of the session
store) for its whole life, and a client that sends finals faster than the model translates
them grows its queue without end. These limits keep one tenant from exhausting a replica;
each refusal is a frame or close code the client can act on (README, "Live captions").

Backpressure has a second bound, the server's WebSocket keepalive: uvicorn reads the
client's pong with the data, behind every frame sent before it, so a reader that leaves the
socket unread (the client's sends wait in TCP) for longer than the ping timeout has the
connection killed (1011) with its accepted finals unanswered. ``ReadPauses`` keeps the
reader's pauses within ``max_read_pause_s``, well under that timeout.

The values come from the live settings, ``settings.live.<name>`` (flags
``--live-<name>``); the defaults below apply to settings objects without them, and tests
may set ``LiveLimits`` on the app state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLOSE_POLICY = 1008  # bad key, disallowed Origin
CLOSE_TRY_AGAIN = 1013  # too many connections, not ready


@dataclass(frozen=True)
class LiveLimits:
    max_frame_chars: int = 64_000  # a longer text frame gets a 'too_large' error frame
    max_connections: int = 256  # open live sockets per replica
    max_connections_per_key: int = 64  # per API key (only when the server has keys)
    max_pending_finals: int = 256  # finals queued per connection before backpressure
    backpressure_s: float = 30.0  # how long the reader waits for room before refusing
    # ... capped by this, in all until the reader finds the socket empty again: well under
    # the WebSocket keepalive's ping timeout (uvicorn's ws_ping_timeout, 20 s, which
    # `serve` keeps), whose pongs are read only with the data (no flag: it follows the
    # keepalive, not the workload)
    max_read_pause_s: float = 5.0
    start_timeout_s: float = 10.0  # seconds until 'start' must have arrived
    max_viewers: int = 2000  # room viewers (/v1/live/watch) per replica
    max_viewers_per_room: int = 500  # viewers of one room
    viewer_queue_frames: int = 64  # a viewer's queued frames before its partials are dropped
    viewer_max_finals: int = 1024  # finals queued for one viewer before it is disconnected
    max_audio_backlog_s: float = 30.0  # audio waiting for recognition, per speaker
    # one binary frame: 2 s at 48 kHz (a client sends 100-500 ms per frame)
    max_audio_frame_bytes: int = 192_000

    @classmethod
    def from_settings(cls, settings: Any) -> LiveLimits:
        """Defaults, overridden by ``settings.live.<name>`` where the settings define it."""
        live = getattr(settings, "live", None)
        values = {}
        for name in cls.__dataclass_fields__:
            value = getattr(live, name, None)
            if value is not None:
                values[name] = value
        return cls(**values)

    @property
    def read_pause_s(self) -> float:
        """The reader's budget of pauses for room (``ReadPauses``)."""
        return min(self.backpressure_s, self.max_read_pause_s)


# A receive that waited this long found the socket empty: every frame the client sent
# before (its pongs too) has been read.
SOCKET_EMPTY_S = 0.05


class ReadPauses:
    """How long the reader may still stop reading the socket to wait for room.

    Why a budget and not a wait per frame: a client that keeps sending keeps the socket
    full, and the pong that keeps the connection alive waits behind everything it sent
    before; only a reader that reads everything (and finds the socket empty) has surely
    read it. So the pauses since the socket was last found empty count together; once
    ``budget_s`` is spent the reader reads on, and what finds no room is refused
    (``too_many_pending``) or dropped (``audio_overrun``) until it finds the socket empty,
    which renews the budget. A client that slows down is throttled by TCP alone.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.paused_s = 0.0  # paused since the socket was last found empty

    def left(self) -> float:
        return max(0.0, self.budget_s - self.paused_s)

    def paused(self, seconds: float) -> None:
        self.paused_s += seconds

    def received(self, waited_s: float) -> None:
        """A frame arrived ``waited_s`` after the reader asked for one."""
        if waited_s >= SOCKET_EMPTY_S:
            self.paused_s = 0.0


def limits_of(state: Any) -> LiveLimits:
    """The limits in force for a server: its explicit ``live_limits`` (tests), else the
    settings'."""
    return state.live_limits or LiveLimits.from_settings(state.settings)


def admission_refusal(open_owners: list[str | None], owner: str | None,
                      limits: LiveLimits) -> str | None:
    """Why a new connection of ``owner`` must be refused, or None to admit it.

    ``open_owners`` lists the owner (hashed API key, None without keys) of every open
    connection. Per-key limits apply only when keys are in use: without keys every client
    is the same anonymous tenant and only the total bound makes sense.
    """
    if len(open_owners) >= limits.max_connections:
        return f"too many live connections (limit {limits.max_connections}); retry later"
    if owner is not None and sum(o == owner for o in open_owners) >= \
            limits.max_connections_per_key:
        return (f"too many live connections for this API key "
                f"(limit {limits.max_connections_per_key}); retry later")
    return None
