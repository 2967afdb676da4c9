"""The live sockets (/v1/live, /v1/live/watch, WHEP listeners): how many, how large, how long."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from app.settings.base import SubsystemSettings


class LiveSettings(SubsystemSettings):
    """The live sockets (/v1/live, /v1/live/watch, WHEP listeners)."""

    group: ClassVar[str] = "live options"
    flat_prefix: ClassVar[str] = "live_"
    flat_names: ClassVar[dict[str, str]] = {"max_sessions": "max_live_sessions"}

    max_frame_chars: int = Field(
        64_000, ge=1, description="longest WebSocket text frame; longer gets a too_large frame")
    max_connections: int = Field(256, ge=1, description="open live sockets per replica")
    max_connections_per_key: int = Field(
        64, ge=1, description="open live sockets per API key (when keys are set)")
    max_pending_finals: int = Field(
        256, ge=1, description="finals queued per live connection before backpressure")
    backpressure_s: float = Field(
        30.0, gt=0, description="seconds a live reader waits for room before too_many_pending "
                         "(at most 5 s before it has read all the client sent: the keepalive)")
    start_timeout_s: float = Field(
        10.0, gt=0, description="seconds a new live socket may take to send 'start'; then "
                                "it gets a start_timeout error frame and is closed (1008), "
                                "so an idle socket cannot hold a live-session slot")
    max_viewers: int = Field(
        2000, ge=1, description="room viewers (/v1/live/watch) per replica; more get a "
                                "too_many_viewers error frame and close 1013")
    max_viewers_per_room: int = Field(
        500, ge=1, description="viewers of one room; more get too_many_viewers and 1013")
    max_listeners: int = Field(
        200, ge=1, description="WebRTC listeners of room voices (/v1/rooms/{room}/voice/"
                               "{lang}/whep) per replica; more get 503 too_many_listeners "
                               "(each costs an Opus encoder; HLS listeners are not counted)")
    max_audio_backlog_s: float = Field(
        30.0, gt=0, description="seconds of a speaker's audio that may wait for speech "
                                "recognition; beyond it the socket is read no further "
                                "(backpressure), then frames are dropped with audio_overrun")
    max_sessions: int = Field(
        8, ge=1, description="live sessions admitted at once; more get a busy error at once "
                             "(measure yours with `livetrans bench-concurrency`)")
