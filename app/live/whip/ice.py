"""WHIP's ICE sockets inside a UDP port range (``serve --whip-udp-ports 50000-50100``).

A container reaches publishers only through the UDP ports its host publishes, a fixed
range; aioice (aiortc's ICE) binds each host candidate's socket to whatever port the
kernel picks, and neither aiortc nor aioice has an option to bound it. So before a peer
connection gathers its candidates (``setLocalDescription``), its ICE connection becomes a
``RangedConnection``: the same aioice ``Connection`` whose host candidates bind to a free
port of the range (tried from a random point, so concurrent sessions rarely race for one
port). STUN (server-reflexive) candidates are asked for from those sockets, TURN from
aioice's own. When every port of the range is taken, the connection has no host
candidate and the caller refuses the session (``no_udp_port``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from typing import Any

from aioice import Connection
from aioice.candidate import Candidate, candidate_foundation, candidate_priority
from aioice.ice import StunProtocol, server_reflexive_candidate
from aioice.turn import UDP_SOCKET_BUFFER_SIZE

from app.port_range import PortRange

log = logging.getLogger("livetrans.whip")

RECEIVE_BUFFER = UDP_SOCKET_BUFFER_SIZE  # as aioice sizes its own sockets


class RangedConnection(Connection):
    """An aioice ``Connection`` whose host candidates bind within ``port_range`` (its one
    attribute of its own, set by ``bind_within`` when it takes an existing connection
    over)."""

    port_range: PortRange

    async def get_component_candidates(self, component: int, addresses: list[str],
                                        timeout: int = 5) -> list[Candidate]:
        hosts = []
        for address in addresses:
            protocol = await self._bind(address)
            if protocol is None:
                continue
            host, port = protocol.transport.get_extra_info("sockname")[:2]
            protocol.local_candidate = Candidate(
                foundation=candidate_foundation("host", "udp", host), component=component,
                transport="udp", priority=candidate_priority(component, "host"),
                host=host, port=port, type="host")
            hosts.append(protocol)
        self._protocols += hosts  # aioice pairs remote candidates with these
        candidates = [p.local_candidate for p in hosts]
        if self.stun_server:
            candidates += await self._reflexive(hosts, timeout)
        # TURN (relayed candidates) as aioice does it: its relay sockets are the TURN
        # server's business, not the host's published range
        return candidates + await super().get_component_candidates(component, [], timeout)

    async def _bind(self, address: str) -> StunProtocol | None:
        loop = asyncio.get_running_loop()
        for port in self.port_range.candidates():
            try:
                transport, protocol = await loop.create_datagram_endpoint(
                    lambda: StunProtocol(self), local_addr=(address, port))
            except OSError:
                continue  # taken (or the address cannot bind it): the next one
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            return protocol
        log.warning("WHIP: no UDP port free in %s for a host candidate", self.port_range)
        return None

    async def _reflexive(self, hosts: list[StunProtocol], timeout: int) -> list[Candidate]:
        tasks = [asyncio.ensure_future(server_reflexive_candidate(p, self.stun_server))
                 for p in hosts
                 if ipaddress.ip_address(p.local_candidate.host).version == 4]
        if not tasks:
            return []
        done, pending = await asyncio.wait(tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        return [t.result()[0] for t in done if t.exception() is None]


def bind_within(pc: Any, port_range: PortRange) -> None:
    """Make the ICE connections of ``pc`` (an aiortc ``RTCPeerConnection`` whose remote
    offer is set, so its transports exist, and which has not gathered yet) bind their host
    candidates within ``port_range``."""
    for transceiver in pc.getTransceivers():
        gatherer = transceiver.receiver.transport.transport.iceGatherer
        connection = gatherer._connection  # aiortc exposes no other handle on it
        if type(connection) is Connection:
            connection.__class__ = RangedConnection
        if isinstance(connection, RangedConnection):
            connection.port_range = port_range
