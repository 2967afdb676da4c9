"""SDP offers shaped as OBS Studio's WebRTC output (plugins/obs-webrtc/whip-output.cpp, on
libdatachannel) writes them, for the WHIP tests, besides aiortc's own.

OBS adds the audio track first (mid "0", Opus at payload type 111, sendonly) and the video
track second (mid "1", payload type 96, H264, AV1 or HEVC as the encoder is, with nack, pli
and goog-remb feedback); libdatachannel writes ``a=group:BUNDLE`` and ``a=group:LS`` over
both, ``a=msid-semantic:WMS *``, the ICE credentials, ICE options and the DTLS role and
fingerprint at session level, each track's ``a=ssrc`` lines and ``a=msid`` before
``a=rtcp-mux`` and its ``a=rtpmap``, and the gathered candidates under the first m-section
only. Written here from that description (no OBS or libdatachannel code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

OPUS_PT = 111
VIDEO_PT = 96
VIDEO_CODECS = {"h264": "H264", "av1": "AV1", "hevc": "H265"}
H264_FMTP = "profile-level-id=42e01f;packetization-mode=1;level-asymmetry-allowed=1"


@dataclass
class Transport:
    """What of a peer's own offer an OBS-shaped one carries: ICE, DTLS, its audio SSRC."""

    ufrag: str = "obsF"
    pwd: str = "obs0ice0password0abcdef"
    fingerprint: str = "sha-256 " + ":".join(["AB"] * 32)
    candidates: list[str] = field(
        default_factory=lambda: ["1 1 UDP 2122317823 127.0.0.1 9 typ host"])
    audio_ssrc: int = 3735928559

    @classmethod
    def of(cls, sdp: str) -> Transport:
        """The transport of an aiortc offer (its first m-section's), to publish with."""
        def first(pattern: str) -> str:
            match = re.search(pattern, sdp, re.M)
            assert match, pattern
            return match.group(1).strip()

        return cls(ufrag=first(r"^a=ice-ufrag:(.+)$"), pwd=first(r"^a=ice-pwd:(.+)$"),
                   fingerprint=first(r"^a=fingerprint:(sha-256 .+)$"),
                   candidates=re.findall(r"^a=candidate:(.+?)\s*$", sdp, re.M)[:8],
                   audio_ssrc=int(first(r"^a=ssrc:(\d+) ")))


def obs_offer(video: str | None = "h264", transport: Transport | None = None) -> str:
    """An OBS 30 WHIP offer: Opus audio, then ``video`` (h264, av1, hevc or None)."""
    t = transport or Transport()
    stream, cname = "obsStream0000001", "obsCname00000001"
    mids = "0 1" if video else "0"
    lines = ["v=0", "o=rtc 2690432136 0 IN IP4 127.0.0.1", "s=-", "t=0 0",
             f"a=group:BUNDLE {mids}", f"a=group:LS {mids}", "a=msid-semantic:WMS *",
             "a=setup:actpass", f"a=ice-ufrag:{t.ufrag}", f"a=ice-pwd:{t.pwd}",
             "a=ice-options:ice2,trickle", f"a=fingerprint:{t.fingerprint}",
             f"m=audio 9 UDP/TLS/RTP/SAVPF {OPUS_PT}", "c=IN IP4 0.0.0.0", "a=mid:0",
             "a=sendonly", f"a=ssrc:{t.audio_ssrc} cname:{cname}",
             f"a=ssrc:{t.audio_ssrc} msid:{stream} {stream}-audio",
             f"a=msid:{stream} {stream}-audio", "a=rtcp-mux",
             f"a=rtpmap:{OPUS_PT} opus/48000/2",
             f"a=fmtp:{OPUS_PT} minptime=10;maxaveragebitrate=96000;stereo=1;"
             "sprop-stereo=1;useinbandfec=1",
             *[f"a=candidate:{c}" for c in t.candidates], "a=end-of-candidates"]
    if video:
        ssrc = t.audio_ssrc + 1
        lines += [f"m=video 9 UDP/TLS/RTP/SAVPF {VIDEO_PT}", "c=IN IP4 0.0.0.0", "a=mid:1",
                  "a=sendonly", f"a=ssrc:{ssrc} cname:{cname}",
                  f"a=ssrc:{ssrc} msid:{stream} {stream}-video",
                  f"a=msid:{stream} {stream}-video", "a=rtcp-mux",
                  f"a=rtpmap:{VIDEO_PT} {VIDEO_CODECS[video]}/90000",
                  f"a=rtcp-fb:{VIDEO_PT} nack", f"a=rtcp-fb:{VIDEO_PT} nack pli",
                  f"a=rtcp-fb:{VIDEO_PT} goog-remb"]
        if video == "h264":
            lines.append(f"a=fmtp:{VIDEO_PT} {H264_FMTP}")
    return "\r\n".join(lines) + "\r\n"


def m_lines(sdp: str) -> list[str]:
    """The ``m=`` lines of an SDP text, in order."""
    return [line.strip() for line in sdp.splitlines() if line.startswith("m=")]


def without_section(answer: str, mid: str) -> str:
    """``answer`` without the m-section of ``mid`` (and its bundle entry): what a peer
    that offered only the other sections takes."""
    session, sections = [], []
    for line in answer.splitlines():
        if line.startswith("m="):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            session.append(line)
    kept = [s for s in sections if f"a=mid:{mid}" not in s]
    session = [re.sub(rf" {re.escape(mid)}(?=\s|$)", "", line)
               if line.startswith("a=group:") else line for line in session]
    return "\r\n".join(session + [line for s in kept for line in s]) + "\r\n"
