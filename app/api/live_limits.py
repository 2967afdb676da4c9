"""Bounds of the live socket: frame size, connections, pending finals, room viewers.

A live connection is cheap while idle but holds a session (and so a slot of the session
store) for its whole life, and a client that sends finals faster than the model translates
them grows its queue without end. These limits keep one tenant from exhausting a replica;
each refusal is a frame or close code the client can act on (README, "Live captions").

The values come from the ``Settings`` fields ``live_<name>`` (flags ``--live-<name>``);
the defaults below apply to settings objects without them, and tests may set
``LiveLimits`` on the app state.
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
        """Defaults, overridden by ``settings.live_<name>`` where the settings define it."""
        values = {}
        for name in cls.__dataclass_fields__:
            value = getattr(settings, f"live_{name}", None)
            if value is not None:
                values[name] = value
        return cls(**values)


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
