"""WHIP ingest: a WebRTC publisher's ICE servers, UDP ports and public address."""

from __future__ import annotations

import ipaddress
from typing import ClassVar

from pydantic import Field, field_validator

from app.settings.base import CommaList, SubsystemSettings


class WhipSettings(SubsystemSettings):
    """WHIP ingest."""

    group: ClassVar[str] = "WHIP options"
    flat_prefix: ClassVar[str] = "whip_"

    ice_servers: CommaList = Field(
        default_factory=list, description="STUN/TURN server URLs for WHIP ingest (e.g. "
        "stun:stun.example.org:3478); none by default: ICE offers the host's addresses")
    udp_ports: str | None = Field(
        None, description="UDP ports WHIP sessions' WebRTC media may use, LOW-HIGH (e.g. "
        "50000-50100): the range a container's host publishes; default: any port")
    public_ip: str | None = Field(
        None, description="the address WHIP publishers reach this server's UDP ports by "
        "(the host's public address, when the server runs in a container or behind NAT): "
        "the SDP answer's host candidates carry it; default: the server's own addresses")

    @field_validator("udp_ports")
    @classmethod
    def _whip_udp_ports(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from app.port_range import PortRange

        return str(PortRange.parse(value))  # a ValueError is one line

    @field_validator("public_ip")
    @classmethod
    def _whip_public_ip(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            address = ipaddress.ip_address(value.strip().strip("[]"))
        except ValueError:
            raise ValueError(f"'{value.strip()}' is not an IP address (e.g. 203.0.113.7)") \
                from None
        if address.is_unspecified or address.is_multicast:
            raise ValueError(f"'{address}' cannot receive a publisher's media; name the "
                             "host's public address")
        return str(address)
