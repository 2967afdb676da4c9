"""A speaker's pushes of its finals (YouTube captions, signed webhooks): the hosts they may
reach, their timeouts and retries.
"""

from __future__ import annotations

import ipaddress
import re
from typing import ClassVar

from pydantic import Field, field_validator

from app.settings.base import CommaList, SubsystemSettings

# --output-allow-host: a host name, or *. and a domain (addresses and networks: ipaddress)
_OUTPUT_HOST = re.compile(r"^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*"
                          r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$")


class OutputSettings(SubsystemSettings):
    """A speaker's pushes of its finals (YouTube captions, signed webhooks)."""

    group: ClassVar[str] = "output options"
    flat_prefix: ClassVar[str] = "output_"

    allow_hosts: CommaList = Field(
        default_factory=list,
        description="hosts a speaker's pushes (start's outputs: YouTube captions, signed "
        "webhooks) may reach: a host name (upload.youtube.com), *.example.org (the names "
        "under it), * (any name), an address or a network (10.0.0.5, 10.0.0.0/8). Default: "
        "none. A private or loopback address is refused unless an address, network or "
        "exact host name names it (wildcards never do)")
    timeout_s: float = Field(
        10.0, gt=0, le=300, allow_inf_nan=False,
        description="seconds one push request may take, from connecting to its answer")
    retry_s: float = Field(
        30.0, ge=0, le=3600, allow_inf_nan=False,
        description="seconds after its caption a push is still retried (with backoff) "
                    "before it counts as failed")

    @field_validator("allow_hosts")
    @classmethod
    def _output_hosts(cls, value: list[str]) -> list[str]:
        hosts = []
        for entry in value:
            host = entry.strip().lower()
            hosts.append(host.rstrip(".") if host != "." else host)
            if host == "*" or _OUTPUT_HOST.match(host):
                continue
            try:
                ipaddress.ip_network(host.strip("[]"), strict=False)
            except ValueError:
                raise ValueError(f"'{host}' is not a host: use a host name, *.domain, *, "
                                 "an address or a network (10.0.0.0/8)") from None
        return hosts
