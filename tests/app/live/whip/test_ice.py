"""WHIP's ICE sockets within ``--whip-udp-ports`` (``app.live.whip.ice``): a real aiortc
publisher connects to an answerer whose host candidates were bound within the range, and
a range with every port taken gives no candidate (the route refuses with
``no_udp_port``)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket

import pytest

from app.live.whip.sdp import host_candidate_ports
from app.port_range import PortRange

aiortc = pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
WAIT_S = 120  # a bound against hanging, never a latency


def _range(size: int) -> PortRange:
    low = random.randrange(40_000, 60_000)
    return PortRange(low, low + size - 1)


async def _answer(offer: str, ports: PortRange) -> tuple[object, str]:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    from app.live.whip.ice import bind_within

    pc = RTCPeerConnection()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
    bind_within(pc, ports)
    await pc.setLocalDescription(await pc.createAnswer())
    return pc, pc.localDescription.sdp


def test_a_publisher_connects_to_candidates_bound_within_the_range() -> None:
    asyncio.run(_connects())


async def _connects() -> None:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    ports = _range(20)
    publisher = RTCPeerConnection()
    publisher.addTransceiver("audio", direction="sendonly")
    await publisher.setLocalDescription(await publisher.createOffer())
    answerer, answer = await _answer(publisher.localDescription.sdp, ports)
    connected = asyncio.Event()

    @answerer.on("connectionstatechange")
    def on_state() -> None:
        if answerer.connectionState == "connected":
            connected.set()

    try:
        found = host_candidate_ports(answer)
        assert found and all(ports.low <= p <= ports.high for p in found), found
        await publisher.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        await asyncio.wait_for(connected.wait(), WAIT_S)
        assert publisher.connectionState == "connected"
    finally:
        await publisher.close()
        await answerer.close()


def test_a_range_with_every_port_taken_gives_no_host_candidate() -> None:
    asyncio.run(_exhausted())


async def _exhausted() -> None:
    from aiortc import RTCPeerConnection

    ports = _range(2)
    with contextlib.ExitStack() as held:
        for port in range(ports.low, ports.high + 1):
            for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
                sock = held.enter_context(socket.socket(family, socket.SOCK_DGRAM))
                if family == socket.AF_INET6:  # the IPv4 port is held by the other one
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind((address, port))
                except OSError:  # no IPv6 here, or already taken by someone: taken either way
                    pass
        publisher = RTCPeerConnection()
        publisher.addTransceiver("audio", direction="sendonly")
        await publisher.setLocalDescription(await publisher.createOffer())
        answerer, answer = await _answer(publisher.localDescription.sdp, ports)
        await publisher.close()
        await answerer.close()
    assert host_candidate_ports(answer) == []
