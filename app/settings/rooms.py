"""Rooms: where they live (this process or a Redis bus), their leases, and the transcripts
kept of their talks.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator

from app.settings.base import SubsystemSettings


class RoomSettings(SubsystemSettings):
    """Rooms."""

    group: ClassVar[str] = "room options"
    flat_prefix: ClassVar[str] = "room_"
    flat_names: ClassVar[dict[str, str]] = {
        "data_dir": "data_dir", "transcript_retention_days": "transcript_retention_days"}

    bus: str | None = Field(
        None, description="where rooms live: redis://host:port/db (or redis-sentinel://"
                          "host:port[,host:port...]/SERVICE[/db] for a primary that Redis "
                          "Sentinel fails over) shares rooms, viewers' frames, finals, room "
                          "ownership and transcripts among replicas; default: this process "
                          "only (one replica)")
    lease_s: float = Field(
        10.0, ge=1, le=300, description="seconds a replica holds a room without renewing "
                                        "(a replica that dies frees its rooms after this)")
    data_dir: Path = Field(
        None, validate_default=True,
        description="folder for durable data without a room bus (transcripts.sqlite3); "
                    "default: livetrans in $XDG_DATA_HOME, else in .local/share of your "
                    "home folder")
    transcript_retention_days: float = Field(
        30.0, ge=0, le=36500, allow_inf_nan=False,
        description="days a talk's transcript is kept after the talk started (0: until the "
                    "room's newer talks push it out, 200 per room)")

    @field_validator("bus")
    @classmethod
    def _bus_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if re.match(r"^redis-sentinel://[^\s]+$", value):
            from app.rooms.redis_client import parse_sentinel

            parse_sentinel(value)  # BadRedisURL is a ValueError: one line
            return value
        if not re.match(r"^(rediss?|unix)://[^\s]+$", value):
            raise ValueError("use redis://host:port/db (rediss:// for TLS), or "
                             "redis-sentinel://host:port[,host:port...]/SERVICE[/db]")
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, value: Any) -> Path:
        if value is None or (isinstance(value, str) and not value.strip()):
            xdg = os.environ.get("XDG_DATA_HOME", "").strip()
            base = Path(xdg) if xdg else Path.home() / ".local" / "share"
            return base / "livetrans"
        return Path(value).expanduser()
