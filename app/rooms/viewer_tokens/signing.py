"""Room viewer tokens as signed strings: what a token says (room, id, expiry) and whether
the server made it.

A *room* viewer token admits to every talk of one room until it expires, so an organiser can
print the audience's QR code before the first talk (API.md, "Captions out"). A talk's own
token (``app.rooms.registry``) cannot do that: it exists only once its talk starts.

    rv1.<id: 16 hex>.<expires_at: unix seconds>.<mac: 32 hex>

The MAC is HMAC-SHA256 over the room, the id and the expiry, keyed by a key derived from the
server's API keys (as talk tokens are): every replica with the same keys checks a token
without asking anyone, a restart keeps it valid, and rotating the keys revokes every token.
The room is not written in the token (the link names it) but is signed: a token of one room
opens no other. Signing is half of a valid token; the other half is that the operator has
not revoked it (``app.rooms.viewer_tokens.store``).

Only ``A-Z a-z 0-9 . -`` characters: a token goes in a URL and a QR code unescaped.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

PREFIX = "rv1"
_TOKEN = re.compile(r"rv1\.([0-9a-f]{16})\.([0-9]{1,12})\.([0-9a-f]{32})")
_ID = re.compile(r"[0-9a-f]{16}")


def valid_token_id(value: object) -> bool:
    """Whether ``value`` is a token id as the server makes them (16 hex digits)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def looks_like_room_token(token: object) -> bool:
    """Whether ``token`` has a room token's shape (a talk's token is 32 hex digits): which
    check a route applies, not whether it is valid."""
    return isinstance(token, str) and token.startswith(PREFIX + ".")


@dataclass(frozen=True)
class SignedToken:
    """What a well-signed token says."""

    token_id: str
    expires_at: int  # unix seconds


class RoomTokenSigner:
    """Makes and reads room viewer tokens with one server secret (see the module doc)."""

    def __init__(self, secret: bytes) -> None:
        # its own key, derived one-way: a room token's MAC is never a talk token's
        self._key = hmac.new(secret, b"livetrans room viewer tokens", hashlib.sha256).digest()

    def _mac(self, room: str, token_id: str, expires_at: int) -> str:
        message = f"{room}\x00{token_id}\x00{expires_at}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]

    def sign(self, room: str, token_id: str, expires_at: int) -> str:
        """The token of ``token_id`` in ``room``, valid until ``expires_at``."""
        return f"{PREFIX}.{token_id}.{int(expires_at)}.{self._mac(room, token_id, expires_at)}"

    def read(self, room: str, token: str | None) -> SignedToken | None:
        """What ``token`` says if this server signed it for ``room`` (expired or not);
        None for anything else, malformed or forged, without telling which."""
        match = _TOKEN.fullmatch(token or "")
        if match is None:
            return None
        token_id, expires, mac = match.groups()
        expected = self._mac(room, token_id, int(expires))
        if not hmac.compare_digest(expected.encode(), mac.encode()):
            return None
        return SignedToken(token_id, int(expires))
