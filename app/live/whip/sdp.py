"""The SDP text around aiortc for WHIP: what of a publisher's offer aiortc sees, and the
answer the publisher gets back.

aiortc refuses a whole offer when one of its m-sections has no codec it knows, so an OBS
offer with AV1 or HEVC video would be refused, sound and all, though only the sound is
wanted. So the offer is split first: the audio sections with a codec the server decodes
go to aiortc; every other section (video of any codec, data channels, audio it cannot
decode) is declined in the answer as RFC 3264 rejects a stream (port 0), in its place, so
the publisher sends nothing for it. Static payload types (RFC 3551: PCMU is 0, PCMA is 8)
need no ``a=rtpmap``; aiortc knows codecs only from ``a=rtpmap``, so the missing lines are
added. A declined section may carry the transport attributes of the bundle (OBS's
libdatachannel writes the candidates in the first section only); they move to the first
section aiortc sees when it has none of its own.

``--whip-public-ip``: inside a container the host candidates are the container's
addresses, which a publisher cannot reach; the answer's host candidates (and ``c=``) of
that address family carry the public address instead, with the same port, which the host
forwards to the container (a published UDP port range, ``--whip-udp-ports``).

Pure text: no aiortc import, so the route can check and shape an offer without it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

# the codecs aiortc decodes (RFC 7587 Opus, and G.711 which some encoders send)
AUDIO_CODECS = ("opus", "pcmu", "pcma")
# RFC 3551's static audio payload types: encoding name/clock rate[/channels]
STATIC_AUDIO = {0: "PCMU/8000", 3: "GSM/8000", 4: "G723/8000", 5: "DVI4/8000",
                6: "DVI4/16000", 7: "LPC/8000", 8: "PCMA/8000", 9: "G722/8000",
                10: "L16/44100/2", 11: "L16/44100", 12: "QCELP/8000", 13: "CN/8000",
                14: "MPA/90000", 15: "G728/8000", 16: "DVI4/11025", 17: "DVI4/22050",
                18: "G729/8000"}
# attributes of the bundle's transport (ICE and DTLS), as RFC 8843 shares them
TRANSPORT_ATTRS = ("candidate", "end-of-candidates", "ice-ufrag", "ice-pwd", "ice-options",
                   "fingerprint", "setup")
_M_LINE = re.compile(r"^m=(\S+) (\d+)(?:/\d+)? (\S+)(?: (.*))?$")


@dataclass
class Section:
    """One m-section: its lines, the first being the ``m=`` line."""

    lines: list[str]

    @property
    def kind(self) -> str:
        match = _M_LINE.match(self.lines[0])
        return match.group(1) if match else ""

    @property
    def port(self) -> int:
        match = _M_LINE.match(self.lines[0])
        return int(match.group(2)) if match else 0

    @property
    def formats(self) -> list[str]:
        match = _M_LINE.match(self.lines[0])
        return (match.group(4) or "").split() if match else []

    @property
    def mid(self) -> str | None:
        return next((line[6:].strip() for line in self.lines if line.startswith("a=mid:")),
                    None)

    def attribute_keys(self) -> set[str]:
        return {_attr_key(line) for line in self.lines[1:] if line.startswith("a=")}

    def codecs(self) -> set[str]:
        """Encoding names (lower case) of its ``a=rtpmap`` lines and its static payload
        types."""
        names = set()
        for line in self.lines:
            if line.startswith("a=rtpmap:"):
                _, _, rest = line.partition(" ")
                names.add(rest.split("/", 1)[0].strip().lower())
        for pt in self._unmapped_static():
            names.add(STATIC_AUDIO[pt].split("/", 1)[0].lower())
        return names

    def with_static_rtpmaps(self) -> Section:
        """The section with an ``a=rtpmap`` added for each static payload type it lists
        without one (at its end: the order of attributes is free)."""
        added = [f"a=rtpmap:{pt} {STATIC_AUDIO[pt]}" for pt in self._unmapped_static()]
        return Section(self.lines + added) if added else self

    def _unmapped_static(self) -> list[int]:
        if self.kind != "audio":
            return []
        mapped = {line[9:].split(" ", 1)[0] for line in self.lines
                  if line.startswith("a=rtpmap:")}
        return [int(f) for f in self.formats
                if f.isdigit() and int(f) in STATIC_AUDIO and f not in mapped]

    def usable(self) -> bool:
        """Audio the server decodes, not removed by the offerer (port 0)."""
        return self.kind == "audio" and self.port != 0 and bool(self.codecs() &
                                                                 set(AUDIO_CODECS))

    def data_channel(self) -> bool:
        """An SCTP data channel section (RFC 8841), not removed by the offerer."""
        return self.kind == "application" and self.port != 0 and "SCTP" in \
            (self.lines[0].split()[2] if len(self.lines[0].split()) > 2 else "")

    def declined(self) -> list[str]:
        """This section rejected in an answer (RFC 3264 section 6: port 0, one of the
        offered formats; RFC 8843: outside the bundle)."""
        match = _M_LINE.match(self.lines[0])
        proto = match.group(3) if match else "UDP/TLS/RTP/SAVPF"
        fmt = (self.formats or ["0"])[0]
        lines = [f"m={self.kind} 0 {proto} {fmt}", "c=IN IP4 0.0.0.0"]
        if self.mid is not None:
            lines.append(f"a=mid:{self.mid}")
        return lines + ["a=inactive"]


@dataclass
class Description:
    """An SDP text as its session lines and its m-sections."""

    session: list[str]
    sections: list[Section] = field(default_factory=list)

    @classmethod
    def parse(cls, sdp: str) -> Description:
        session: list[str] = []
        sections: list[Section] = []
        for line in sdp.splitlines():
            line = line.strip()
            if not line:
                continue
            if line.startswith("m="):
                sections.append(Section([line]))
            elif sections:
                sections[-1].lines.append(line)
            else:
                session.append(line)
        return cls(session, sections)

    def text(self) -> str:
        lines = self.session + [line for s in self.sections for line in s.lines]
        return "\r\n".join(lines) + "\r\n"


def _attr_key(line: str) -> str:
    return line[2:].split(":", 1)[0]


@dataclass
class PreparedOffer:
    """What aiortc answers (``sdp``) and where the declined sections go in the answer."""

    sdp: str
    declined: dict[int, list[str]]  # m-section index in the offer -> its rejected lines
    count: int  # m-sections in the offer


def audio_sections(sdp: str) -> list[Section]:
    """The offer's audio m-sections, static payload types mapped."""
    return [s.with_static_rtpmaps() for s in Description.parse(sdp).sections
            if s.kind == "audio"]


def prepare_offer(sdp: str, data_channels: bool = False) -> PreparedOffer:
    """The offer for aiortc: its usable audio sections only (and its data channel
    sections with ``data_channels``: a browser's realtime call carries its events on
    one), bundle groups limited to them, transport attributes of declined sections kept
    (see the module's docstring). The caller has checked that one usable audio section
    exists."""
    offer = Description.parse(sdp)
    kept: list[Section] = []
    declined: dict[int, list[str]] = {}
    moved: list[str] = []
    for index, section in enumerate(offer.sections):
        section = section.with_static_rtpmaps()
        if section.usable() or (data_channels and section.data_channel()):
            kept.append(section)
        else:
            declined[index] = section.declined()
            moved += [line for line in section.lines[1:]
                      if line.startswith("a=") and _attr_key(line) in TRANSPORT_ATTRS]
    if kept and moved:
        have = kept[0].attribute_keys()
        extra = [line for line in moved if _attr_key(line) not in have]
        kept[0] = Section(kept[0].lines + _dedupe(extra))
    mids = {s.mid for s in kept if s.mid is not None}
    session = [_limit_group(line, mids) for line in offer.session]
    out = Description([line for line in session if line is not None], kept)
    return PreparedOffer(out.text(), declined, len(offer.sections))


def _dedupe(lines: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def _limit_group(line: str, mids: set[str]) -> str | None:
    """``a=group:BUNDLE 0 1`` with only the kept mids; None when none is left."""
    if not line.startswith("a=group:"):
        return line
    words = line[8:].split()
    items = [item for item in words[1:] if item in mids]
    return f"a=group:{words[0]} {' '.join(items)}" if items else None


def assemble_answer(answer: str, offer: PreparedOffer) -> str:
    """aiortc's answer to the kept sections, with each declined section back in its
    place, so the answer has the offer's m-sections in the offer's order."""
    parsed = Description.parse(answer)
    answered = iter(parsed.sections)
    sections = []
    for index in range(offer.count):
        if index in offer.declined:
            sections.append(Section(offer.declined[index]))
        else:
            sections.append(next(answered))
    return Description(parsed.session, sections).text()


def advertise_address(answer: str, public_ip: str) -> str:
    """The answer with ``public_ip`` for every host candidate (and ``c=`` line) of its
    address family: the address a publisher outside the host reaches the server by."""
    public = ipaddress.ip_address(public_ip)
    family = f"IP{public.version}"
    parsed = Description.parse(answer)
    for section in parsed.sections:
        for i, line in enumerate(section.lines):
            if line.startswith("a=candidate:"):
                bits = line.split()
                if len(bits) >= 8 and bits[7] == "host" and _same_family(bits[4], public):
                    bits[4] = str(public)
                    section.lines[i] = " ".join(bits)
            elif line.startswith("c=IN ") and section.port != 0:
                parts = line.split()
                if len(parts) == 3 and parts[1] == family:
                    section.lines[i] = f"c=IN {family} {public}"
    return parsed.text()


def host_candidate_ports(answer: str) -> list[int]:
    """The ports of the answer's host candidates (what ``--whip-udp-ports`` bounds)."""
    ports = []
    for section in Description.parse(answer).sections:
        for line in section.lines:
            bits = line.split()
            if line.startswith("a=candidate:") and len(bits) >= 8 and bits[7] == "host":
                ports.append(int(bits[5]))
    return ports


def _same_family(address: str, public: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(address).version == public.version
    except ValueError:  # an mDNS name (aiortc does not write them; kept as it is)
        return False
