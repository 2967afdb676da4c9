"""What aiortc sees of a WHIP offer and the answer the publisher gets
(``app.live.whip.sdp``): an OBS offer's video, of any codec, is declined in its place and
never reaches aiortc; static payload types count without ``a=rtpmap``; transport attributes
of a declined section are kept; ``--whip-public-ip`` rewrites the host candidates. The
same offers against a real server are ``tests/app/live/whip/test_route.py``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.live.peer import OfferError, check_offer
from app.live.whip.sdp import (
    Description,
    Section,
    advertise_address,
    assemble_answer,
    host_candidate_ports,
    prepare_offer,
)
from tests.whip_offers import m_lines, obs_offer


@pytest.mark.parametrize("video", ["h264", "av1", "hevc"])
def test_an_obs_offer_reaches_aiortc_as_its_sound_alone(video: str) -> None:
    offer = obs_offer(video)
    assert check_offer(offer.encode()) == offer
    prepared = prepare_offer(offer)
    assert m_lines(prepared.sdp) == ["m=audio 9 UDP/TLS/RTP/SAVPF 111"]
    session = Description.parse(prepared.sdp).session
    assert "a=group:BUNDLE 0" in session and "a=group:LS 0" in session
    # session-level ICE and DTLS stay where OBS wrote them
    assert {"a=setup:actpass", "a=ice-options:ice2,trickle"} <= set(session)
    assert prepared.count == 2 and list(prepared.declined) == [1]
    assert prepared.declined[1] == ["m=video 0 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 0.0.0.0",
                                    "a=mid:1", "a=inactive"]


def test_the_answer_has_the_offers_sections_in_order_the_declined_ones_at_port_0() -> None:
    prepared = prepare_offer(obs_offer("av1"))
    aiortc_answer = ("v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n"
                     "m=audio 50001 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 10.0.0.2\r\n"
                     "a=recvonly\r\na=mid:0\r\na=rtpmap:111 opus/48000/2\r\n")
    answer = assemble_answer(aiortc_answer, prepared)
    assert m_lines(answer) == ["m=audio 50001 UDP/TLS/RTP/SAVPF 111",
                               "m=video 0 UDP/TLS/RTP/SAVPF 96"]
    assert "a=group:BUNDLE 0\r\n" in answer and answer.endswith("a=inactive\r\n")


def test_candidates_written_under_a_declined_first_section_move_to_the_sound() -> None:
    video_first = ("v=0\r\no=- 1 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
                   "a=group:BUNDLE v a\r\n"
                   "m=video 9 UDP/TLS/RTP/SAVPF 45\r\na=mid:v\r\na=rtpmap:45 AV1/90000\r\n"
                   "a=ice-ufrag:uf\r\na=ice-pwd:pwpwpwpwpwpwpwpwpwpwpw\r\n"
                   "a=candidate:1 1 UDP 2122317823 10.1.1.1 40000 typ host\r\n"
                   "a=end-of-candidates\r\n"
                   "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:a\r\na=ice-ufrag:uf\r\n"
                   "a=rtpmap:111 opus/48000/2\r\n")
    prepared = prepare_offer(video_first)
    audio = Description.parse(prepared.sdp).sections[0].lines
    assert "a=candidate:1 1 UDP 2122317823 10.1.1.1 40000 typ host" in audio
    assert "a=end-of-candidates" in audio and "a=ice-pwd:pwpwpwpwpwpwpwpwpwpwpw" in audio
    assert audio.count("a=ice-ufrag:uf") == 1  # its own is kept, not doubled
    assert "a=group:BUNDLE a" in prepared.sdp and list(prepared.declined) == [0]


def test_static_payload_types_need_no_rtpmap() -> None:
    g711 = ("v=0\r\no=- 1 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
            "m=audio 9 UDP/TLS/RTP/SAVPF 0 8\r\na=mid:0\r\na=rtcp-mux\r\n")
    assert check_offer(g711.encode()) == g711
    prepared = prepare_offer(g711)
    assert "a=rtpmap:0 PCMU/8000\r\n" in prepared.sdp
    assert "a=rtpmap:8 PCMA/8000\r\n" in prepared.sdp and not prepared.declined
    # a static type the server does not decode is still named in the refusal's terms
    g722 = g711.replace("SAVPF 0 8", "SAVPF 9")
    with pytest.raises(OfferError) as refused:
        check_offer(g722.encode())
    assert refused.value.code == "unsupported_codec"


def test_a_removed_or_undecodable_audio_section_is_declined_too() -> None:
    two = obs_offer(None) + ("m=audio 0 UDP/TLS/RTP/SAVPF 111\r\na=mid:2\r\n"
                             "a=rtpmap:111 opus/48000/2\r\n"
                             "m=audio 9 UDP/TLS/RTP/SAVPF 9\r\na=mid:3\r\n")
    prepared = prepare_offer(two)
    assert m_lines(prepared.sdp) == ["m=audio 9 UDP/TLS/RTP/SAVPF 111"]
    assert sorted(prepared.declined) == [1, 2]


def test_the_public_address_replaces_host_candidates_of_its_family() -> None:
    answer = ("v=0\r\ns=-\r\nt=0 0\r\n"
              "m=audio 50007 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 172.18.0.3\r\n"
              "a=candidate:aa 1 udp 2130706431 172.18.0.3 50007 typ host\r\n"
              "a=candidate:bb 1 udp 2130706431 fd00::3 50008 typ host\r\n"
              "a=candidate:cc 1 udp 1694498815 198.51.100.9 61000 typ srflx raddr "
              "172.18.0.3 rport 50007\r\n"
              "m=video 0 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\n")
    out = advertise_address(answer, "203.0.113.7")
    assert "a=candidate:aa 1 udp 2130706431 203.0.113.7 50007 typ host\r\n" in out
    assert "fd00::3 50008 typ host" in out  # another family: as it was
    assert "198.51.100.9 61000 typ srflx raddr 172.18.0.3" in out  # not a host candidate
    assert "c=IN IP4 203.0.113.7\r\n" in out and "c=IN IP4 0.0.0.0\r\n" in out
    assert "172.18.0.3 50007 typ host" not in out
    assert host_candidate_ports(out) == [50007, 50008]


_LINES = st.sampled_from([
    "m=audio 9 UDP/TLS/RTP/SAVPF 111 0", "m=video 9 UDP/TLS/RTP/SAVPF 96", "m=audio 0 RTP/AVP",
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "m=", "m=audio x y", "a=mid:0",
    "a=mid:", "a=rtpmap:111 opus/48000/2", "a=rtpmap:", "a=rtpmap:0", "a=group:BUNDLE 0 1",
    "a=group:", "a=candidate:1 1 UDP 1 10.0.0.1 9 typ host", "a=candidate:", "c=IN IP4",
    "a=ice-ufrag:u", "a=setup:actpass", "a=fingerprint:sha-256 AA"])


@given(st.lists(st.one_of(_LINES, st.text(max_size=30)), max_size=25))
def test_any_text_is_an_offer_or_one_offer_error(lines: list[str]) -> None:
    sdp = "\r\n".join(["v=0", *lines])
    try:
        check_offer(sdp.encode())
    except OfferError:
        return
    prepared = prepare_offer(sdp)
    assert len(prepared.declined) < prepared.count
    fake = Description(["v=0"], [Section([f"m=audio 9 X {i}"]) for i in
                                 range(prepared.count - len(prepared.declined))])
    assert len(m_lines(assemble_answer(fake.text(), prepared))) == prepared.count
