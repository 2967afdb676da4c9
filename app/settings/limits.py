"""What one request may ask for, and the translation sessions kept between requests."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from app.settings.base import SubsystemSettings


class LimitsSettings(SubsystemSettings):
    """What one request may ask for, and the translation sessions kept between requests."""

    group: ClassVar[str] = "request limits"

    max_source_chars: int = Field(
        4000, ge=1, description="longest source text (and prediction) accepted")
    max_new_tokens: int = Field(512, ge=1, description="cap on max_tokens per request")
    max_context_chars: int = Field(
        2000, ge=0, description="characters of earlier finals (source and translation) a "
                                "request's context may show the model; older ones are left out")
    max_sessions: int = Field(1000, ge=1, description="sessions kept (least recently used go)")
    session_ttl_s: float = Field(1800.0, gt=0, description="idle seconds before a session expires")
