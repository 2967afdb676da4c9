"""Audience links without a server: the public base, the viewer link, the QR code's SVG
(drawn again by segno's PNG writer from the same data and decoded by zxing-cpp; the route's
own SVG is decoded from Chromium's pixels in tests/app/rooms/audience/test_route.py) and
which talk a room has now."""

from __future__ import annotations

import asyncio
import io
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, urlsplit

import pytest
import segno

from app.rooms.audience.links import (
    BadBaseURL,
    CurrentTalk,
    check_base_url,
    current_talk,
    public_base,
    qr_svg,
    viewer_link,
)
from app.rooms.bus import TalkInfo
from app.rooms.bus.local import LocalBus
from app.rooms.registry import RemoteTalk, RoomRegistry
from app.settings import Settings, SettingsError, load_settings
from tests.app.api.pixels import decode_qr

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("url, base", [
    ("https://captions.example.org", "https://captions.example.org"),
    ("https://captions.example.org/", "https://captions.example.org"),
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://[::1]:8000", "http://[::1]:8000"),
    ("https://example.org/events/livetrans/", "https://example.org/events/livetrans"),
    (" https://xn--bcher-kva.example ", "https://xn--bcher-kva.example"),
])
def test_a_plain_base_url_is_kept_without_its_trailing_slash(url: str, base: str) -> None:
    assert check_base_url(url) == base


@pytest.mark.parametrize("url", [
    "", "captions.example.org", "ftp://example.org", "javascript:alert(1)",
    "https://example.org/?a=1", "https://example.org/#x", "https://user:pw@example.org",
    "https://bücher.example", "https://exa mple.org", 'https://example.org"><svg',
    "https://example.org/a b", "https://example.org:99999999", "https://<script>/",
])
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(BadBaseURL):
        check_base_url(url)


def test_the_configured_public_url_wins_over_the_request() -> None:
    assert public_base("https://captions.example.org", "http://10.0.0.5:8000/") == \
        "https://captions.example.org"
    assert public_base(None, "http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    with pytest.raises(BadBaseURL):  # a forged Host header is no base for a printed code
        public_base(None, "http://evil\"host/")


def test_the_public_url_setting_is_checked_and_optional() -> None:
    assert Settings().http.public_url is None
    assert Settings(public_url=" ").http.public_url is None
    assert Settings(public_url="https://captions.example.org/live/").http.public_url == \
        "https://captions.example.org/live"
    with pytest.raises(SettingsError, match="public-url"):
        load_settings(public_url="captions.example.org")


def test_the_viewer_link_is_the_caption_screen_with_its_token() -> None:
    link = viewer_link("https://captions.example.org/lt", "keynote-1", "de", TOKEN)
    parts = urlsplit(link)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "captions.example.org",
                                                        "/lt/watch")
    assert parse_qs(parts.query) == {"room": ["keynote-1"], "lang": ["de"], "token": [TOKEN]}
    assert viewer_link("http://127.0.0.1:8000", "r.1_x-y", "ja") == \
        "http://127.0.0.1:8000/watch?room=r.1_x-y&lang=ja"


def test_the_svg_is_a_scalable_black_on_white_code_of_the_link() -> None:
    link = viewer_link("https://captions.example.org", "keynote-1", "de", TOKEN)
    svg = qr_svg(link, title="Live captions of <keynote-1> & co")
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    side = int(root.get("width"))
    assert root.get("height") == str(side) and root.get("viewBox") == f"0 0 {side} {side}"
    title = root.find("{http://www.w3.org/2000/svg}title")
    assert title is not None and title.text == "Live captions of <keynote-1> & co"  # escaped
    assert b"<script" not in svg and b"style=" not in svg
    # the same data through segno's PNG writer decodes to the link
    code = segno.make(link, error="m", micro=False)
    png = io.BytesIO()
    code.save(png, kind="png", scale=4, border=4)
    assert decode_qr(png.getvalue()) == [link]
    assert side == code.symbol_size(scale=8, border=4)[0]


class _SharedBus(LocalBus):
    """A bus that knows a talk on another replica (the Redis bus's answer, in memory)."""

    shared = True

    def __init__(self, talks: dict[str, TalkInfo]) -> None:
        super().__init__()
        self.talks = talks

    async def current_talk(self, room: str) -> TalkInfo | None:
        return self.talks.get(room)


def test_the_current_talk_is_found_here_or_on_the_bus() -> None:
    registry = RoomRegistry(["key"])
    local = registry.claim("here", object(), ["de", "ja"])
    registry.claim("followed", RemoteTalk("00000000000000ff", "replica-b"), ["fr"])
    registry.join("waiting", "de", max_viewers=10, max_per_room=10)  # no talk yet
    elsewhere = TalkInfo("elsewhere", "00000000000000ee", "replica-c", ("es",), 0.0)

    async def ask(bus, room: str) -> CurrentTalk | None:
        return await current_talk(registry, bus, room)

    single, shared = LocalBus(), _SharedBus({"elsewhere": elsewhere})
    assert asyncio.run(ask(single, "here")) == CurrentTalk(local.talk_id, ("de", "ja"))
    assert asyncio.run(ask(single, "followed")) == CurrentTalk("00000000000000ff", ("fr",))
    assert asyncio.run(ask(single, "waiting")) is None
    assert asyncio.run(ask(single, "elsewhere")) is None
    assert asyncio.run(ask(shared, "elsewhere")) == CurrentTalk("00000000000000ee", ("es",))
    assert asyncio.run(ask(shared, "nowhere")) is None
