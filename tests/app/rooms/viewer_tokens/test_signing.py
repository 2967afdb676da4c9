"""Room viewer tokens as signed strings: what the server signs it reads back, and nothing
else (another room, other API keys, a changed expiry or id, junk of any shape)."""

from __future__ import annotations

import re

from app.rooms.registry import RoomRegistry, token_secret
from app.rooms.viewer_tokens.signing import (
    RoomTokenSigner,
    SignedToken,
    looks_like_room_token,
    valid_token_id,
)

ROOM = "keynote-1"
ID = "0123456789abcdef"
EXPIRES = 1_900_000_000


def _signer(keys: tuple[str, ...] = ("k1",)) -> RoomTokenSigner:
    return RoomTokenSigner(token_secret(keys))


def test_a_token_reads_back_what_was_signed_and_fits_a_link_unescaped() -> None:
    token = _signer().sign(ROOM, ID, EXPIRES)
    assert re.fullmatch(r"[A-Za-z0-9.-]+", token) and looks_like_room_token(token)
    assert _signer().read(ROOM, token) == SignedToken(ID, EXPIRES)
    # every replica with the same keys (in any order) reads it; a key rotation does not
    assert _signer(("k1",)).read(ROOM, token) is not None
    assert _signer(("k2",)).read(ROOM, token) is None
    assert RoomTokenSigner(token_secret(("k1", "k2"))).read(ROOM, token) is None


def test_another_room_or_a_changed_field_is_no_token() -> None:
    signer = _signer()
    token = signer.sign(ROOM, ID, EXPIRES)
    prefix, token_id, expires, mac = token.split(".")
    assert signer.read("keynote-2", token) is None
    assert signer.read(ROOM, f"{prefix}.{token_id}.{EXPIRES + 86400}.{mac}") is None
    assert signer.read(ROOM, f"{prefix}.{'f' * 16}.{expires}.{mac}") is None
    assert signer.read(ROOM, f"{prefix}.{token_id}.{expires}.{'0' * 32}") is None
    assert signer.read(ROOM, token.upper()) is None


def test_junk_is_no_token_and_raises_nothing() -> None:
    signer = _signer()
    for junk in (None, "", "rv1", "rv1....", "é\x00" * 40, "rv1." + "é" * 70, "0" * 32,
                 "rv1.0123456789abcdef.99999999999999999999.00", " " + signer.sign(ROOM, ID, 1)):
        assert signer.read(ROOM, junk) is None, junk
    assert not looks_like_room_token(None) and not looks_like_room_token("0" * 32)


def test_a_room_token_is_never_a_talk_token() -> None:
    """A room token's MAC uses a key of its own: a talk token of the same room and an id
    that looks like a talk id is not a room token's MAC, nor the other way round."""
    registry = RoomRegistry(["k1"])
    token = _signer().sign(ROOM, ID, EXPIRES)
    mac = token.rsplit(".", 1)[1]
    assert mac != registry.token(ROOM, ID)
    assert not registry.token_ok_for_talk(ROOM, ID, token)
    assert not registry.token_ok_for_talk(ROOM, ID, mac)


def test_token_ids_are_16_hex_digits() -> None:
    assert valid_token_id(ID)
    for bad in ("", ID.upper(), ID + "0", "../" + ID[:13], None, 12):
        assert not valid_token_id(bad)
