"""A WebRTC peer that answers an offer, with aiortc: what WHIP ingest
(``app.live.whip``) and OpenAI's realtime calls (``app.live.realtime.webrtc``) share.

An offer is checked as text first (``check_offer``: size, UTF-8, SDP, sound with a codec
the server decodes), so each refusal says what was wrong before aiortc sees it. What
aiortc then sees of it, and the answer's shape, are ``app.live.whip.sdp``'s: sound (and,
for a call, its data channel) answered, everything else declined in place. ICE uses the
host's own addresses; STUN or TURN servers only when the operator names them
(``serve --whip-ice-server``); ``--whip-udp-ports`` bounds the sockets to a published
range (``app.live.whip.ice``) and ``--whip-public-ip`` is the address the answer gives.

aiortc is imported only when a peer is made, so the server runs without the speech extra.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.live.whip.sdp import (
    AUDIO_CODECS,
    advertise_address,
    assemble_answer,
    audio_sections,
    host_candidate_ports,
    prepare_offer,
)
from app.port_range import PortRange
from app.settings import Settings

MAX_OFFER_BYTES = 32_768  # an SDP offer is a few kilobytes


class OfferError(ValueError):
    """An offer the server cannot answer; ``code`` and ``message`` for a 400."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_offer(body: bytes) -> str:
    """The offer's text, or ``OfferError``: not text, no audio, no codec the server
    decodes. Checked before aiortc sees it, so each refusal says what was wrong."""
    if len(body) > MAX_OFFER_BYTES:
        raise OfferError("invalid_offer", f"SDP offer of {len(body)} bytes; the limit is "
                         f"{MAX_OFFER_BYTES}")
    try:
        sdp = body.decode("utf-8")
    except UnicodeDecodeError:
        raise OfferError("invalid_offer", "the SDP offer is not UTF-8 text") from None
    if not sdp.startswith("v=0"):
        raise OfferError("invalid_offer", "the body is no SDP offer (it must start with "
                         "'v=0')")
    audio = audio_sections(sdp)
    if not audio:
        raise OfferError("offer_without_audio", "the offer has no audio (m=audio); publish "
                         "a stream with sound")
    if not any(section.usable() for section in audio):
        raise OfferError("unsupported_codec", "the offer's audio has no codec this server "
                         f"decodes ({', '.join(AUDIO_CODECS)}); send Opus")
    return sdp


@dataclass(frozen=True)
class IceOptions:
    """How the server's WebRTC peers are reached: ``serve --whip-ice-server``,
    ``--whip-udp-ports``, ``--whip-public-ip``."""

    servers: tuple[str, ...] = ()
    ports: PortRange | None = None
    public_ip: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> IceOptions:
        ports = PortRange.parse(settings.whip.udp_ports) if settings.whip.udp_ports else None
        return cls(tuple(settings.whip.ice_servers), ports, settings.whip.public_ip)


class NoUdpPort(RuntimeError):
    """Every UDP port of ``--whip-udp-ports`` is in use."""


def new_peer(ice: IceOptions) -> Any:
    """An aiortc peer connection with the operator's STUN/TURN servers."""
    from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection

    config = RTCConfiguration(iceServers=[RTCIceServer(urls=u) for u in ice.servers])
    return RTCPeerConnection(configuration=config)


async def answer_offer(pc: Any, sdp: str, ice: IceOptions, *, data_channels: bool = False,
                       send: Iterable[Any] = ()) -> str:
    """``pc``'s answer to ``sdp`` (checked by ``check_offer``), sending the ``send``
    tracks on the offer's matching sections; ``OfferError`` for an offer aiortc cannot
    answer, ``NoUdpPort`` when ``ice.ports`` has none free. Either way ``pc`` is closed
    before the error is raised."""
    from aiortc import RTCSessionDescription

    try:
        offer = prepare_offer(sdp, data_channels=data_channels)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer.sdp, type="offer"))
        for track in send:
            pc.addTrack(track)
        if ice.ports is not None:
            from app.live.whip.ice import bind_within

            bind_within(pc, ice.ports)
        await pc.setLocalDescription(await pc.createAnswer())
        answer = assemble_answer(pc.localDescription.sdp, offer)
    except Exception as exc:  # noqa: BLE001 - aiortc's parse errors vary in type
        await pc.close()
        raise OfferError("invalid_offer", "the SDP offer could not be answered "
                         f"({type(exc).__name__})") from None
    if ice.ports is not None and not host_candidate_ports(answer):
        await pc.close()
        raise NoUdpPort("every UDP port for WebRTC is in use; retry later")
    if ice.public_ip:
        answer = advertise_address(answer, ice.public_ip)
    return answer


async def discard(track: Any) -> None:
    """Read a track nobody uses and drop its frames, so none pile up in aiortc's queue."""
    from aiortc.mediastreams import MediaStreamError

    with contextlib.suppress(MediaStreamError):
        while True:
            await track.recv()
