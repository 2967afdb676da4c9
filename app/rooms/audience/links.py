"""Audience links: the viewer link of one language of a room, and its QR code.

The audience reaches the caption screen (``/watch?room=R&lang=de[&token=T]``) by a link
or, in the hall, by a QR code on a screen or a poster (``GET /v1/rooms/{room}/qr``, the
operator page, the printable page). A QR code cannot be corrected once printed or
projected, so the link must be the one the audience can reach:

* the server's public URL (``--public-url``) when the operator set one (behind a reverse
  proxy or a TLS gateway the server cannot know its outside name and scheme);
* otherwise the address the request came to (scheme, ``Host`` header and any root path),
  which is right when the operator's page reaches the server by the same name as the
  audience.

Either way the base is checked to be a plain ``http(s)://host[:port][/path]``: a Host
header is client input, and what goes into a printed code must be a link, not whatever a
client sent.

The code is drawn by ``segno`` as SVG (black on white, a quiet zone of four modules, error
correction M or better): vector, so it stays sharp projected on a wall or printed on A4.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import segno

from app.rooms.bus.base import RoomBus
from app.rooms.registry import RoomRegistry

WATCH_PATH = "/watch"
QR_MODULE_PX = 8  # the SVG's intrinsic size: 8 px a module (about 400 px for a link)
QR_BORDER = 4  # the quiet zone the QR standard asks for, in modules

# host names, IPv4, bracketed IPv6, an optional port: nothing else may start a link
_NETLOC = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])"
                     r"(?::[0-9]{1,5})?")
_PATH = re.compile(r"(?:/[A-Za-z0-9._~!$&'()*+,;=:@%-]*)*")


class BadBaseURL(ValueError):
    """The public base URL is not a plain ``http(s)://host[:port][/path]``."""


def check_base_url(url: str) -> str:
    """``url`` without a trailing slash, or ``BadBaseURL`` saying what is wrong.

    No query, fragment or user info (a link is appended to it); ASCII only (an
    internationalised name goes in its ``xn--`` form, as every QR reader can open)."""
    text = url.strip()
    if not text.isascii():
        raise BadBaseURL("use ASCII (an internationalised host name in its xn-- form)")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise BadBaseURL("use http:// or https://")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise BadBaseURL("no query or fragment: scheme://host[:port][/path]")
    if not _NETLOC.fullmatch(parts.netloc):
        raise BadBaseURL("use scheme://host[:port][/path] (no user name or password)")
    if not _PATH.fullmatch(parts.path):
        raise BadBaseURL("the path has characters a link cannot carry unescaped")
    return text.rstrip("/")


def public_base(configured: str | None, request_base: str) -> str:
    """The base of viewer links: the configured public URL, else the request's own base
    (``BadBaseURL`` when that is no plain link, e.g. a forged Host header)."""
    return check_base_url(configured or request_base)


def viewer_link(base: str, room: str, lang: str, token: str | None = None) -> str:
    """The caption screen of ``lang`` in ``room`` under ``base`` (with a viewer token where
    the server has keys: a room viewer token, valid across the room's talks, or a talk's)."""
    query = {"room": room, "lang": lang}
    if token:
        query["token"] = token
    return f"{base}{WATCH_PATH}?{urlencode(query)}"


def qr_svg(link: str, *, title: str) -> bytes:
    """``link`` as a QR code in SVG: a fixed intrinsic size and a ``viewBox``, so it is
    sharp at any size a page gives it; white behind the dark modules (a code on a dark
    slide or a transparent page must still scan). ``title`` names it for screen readers
    and is escaped by segno."""
    code = segno.make(link, error="m", micro=False)  # boost_error raises M when it fits
    out = io.BytesIO()
    code.save(out, kind="svg", scale=QR_MODULE_PX, border=QR_BORDER, dark="#000",
              light="#fff", xmldecl=False, title=title)
    side = code.symbol_size(scale=QR_MODULE_PX, border=QR_BORDER)[0]
    svg = out.getvalue().decode("utf-8")
    # segno writes width and height; the viewBox makes the drawing scale with them
    svg = svg.replace("<svg ", f'<svg viewBox="0 0 {side} {side}" '
                      'shape-rendering="crispEdges" ', 1)
    return svg.encode("utf-8")


@dataclass(frozen=True)
class CurrentTalk:
    """The talk running in a room now, as far as its audience link is concerned."""

    talk_id: str
    langs: tuple[str, ...]


async def current_talk(registry: RoomRegistry, bus: RoomBus, room: str) -> CurrentTalk | None:
    """The room's talk now: on this replica (its own or one it follows), else, with a
    shared bus, on another replica; None when the room has no talk.

    ``BusUnavailable`` from the bus passes through: the caller cannot tell "no talk" then.
    """
    local = registry.rooms.get(room)
    if local is not None and local.speaker is not None and local.talk_id:
        return CurrentTalk(local.talk_id, tuple(local.langs))
    if bus.shared:
        info = await bus.current_talk(room)
        if info is not None:
            return CurrentTalk(info.talk_id, tuple(info.langs))
    return None
