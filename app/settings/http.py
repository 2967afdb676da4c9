"""Where the server listens and who may reach it: address, request limits, origins and host
names, the audience's address.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator

from app.settings.base import CommaList, SubsystemSettings

_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


class HttpSettings(SubsystemSettings):
    """Where the server listens and who may reach it."""

    group: ClassVar[str] = "HTTP options"

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8000, ge=0, le=65535, description="port to listen on")
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="largest HTTP request body accepted (bytes)")
    request_timeout_s: float = Field(120.0, gt=0, description="seconds before a 504 timeout")
    cors_origins: CommaList = Field(
        default_factory=list,
        description="browser origins allowed cross-origin, e.g. https://app.example "
        "(default none; * = any)")
    allowed_hosts: CommaList = Field(
        default_factory=list,
        description="host names clients may reach the server by (the Host header), e.g. "
        "captions.example.org or *.example.org; * = any. Default: when serving on a loopback "
        "address, localhost and loopback addresses only (a DNS-rebinding page cannot reach "
        "it); otherwise any")
    public_url: str | None = Field(
        None, description="the server's address as the audience reaches it, e.g. "
        "https://captions.example.org (a path prefix too): audience links and QR codes "
        "start with it; default: the address each request came to (scheme and Host header)")
    replica_id: str | None = Field(
        None, description="name sent in the X-Livetrans-Replica header (default host:port)"
    )

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from app.rooms.audience.links import check_base_url

        return check_base_url(value)  # BadBaseURL is a ValueError: one line

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        origins = [v.rstrip("/") if v != "*" else v for v in value]
        for origin in origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise ValueError(
                    f"'{origin}' is not an origin: use scheme://host[:port] (no path) or *")
        return origins
