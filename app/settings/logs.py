"""The log: its level and format."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from app.settings.base import SubsystemSettings, lowercase

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


class LogSettings(SubsystemSettings):
    """The log."""

    group: ClassVar[str] = "log options"
    flat_prefix: ClassVar[str] = "log_"

    level: Literal[LOG_LEVELS] = Field(
        "info", description="critical, error, warning, info or debug")
    format: Literal["text", "json"] = Field(
        "text", description="log lines as text or one JSON object per line (with request_id)")

    @field_validator("level", "format", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return lowercase(value)
