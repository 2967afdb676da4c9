"""Issuing and checking room viewer tokens: a signature (``signing``) and a live record in
the store (``store``), together.

A route or the viewer socket asks ``check``: the token must be signed by this server for
this room, not expired, and still in the store (not revoked). The signature is checked
first, so a forged or malformed token costs no store round trip.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from app.rooms.registry import token_secret
from app.rooms.viewer_tokens.signing import RoomTokenSigner, SignedToken, looks_like_room_token
from app.rooms.viewer_tokens.store import (
    MAX_TOKENS_PER_ROOM,
    RoomTokenRecord,
    ViewerTokenStore,
)


@dataclass(frozen=True)
class IssuedToken:
    """A token just issued: its record and the token itself (shown to the operator once)."""

    record: RoomTokenRecord
    token: str


class RoomViewerTokens:
    """The room viewer tokens of one server (its API keys sign them; ``store`` keeps them)."""

    def __init__(self, api_keys: Iterable[str], store: ViewerTokenStore, *,
                 max_per_room: int = MAX_TOKENS_PER_ROOM,
                 clock: Callable[[], float] = time.time) -> None:
        keys = set(api_keys)
        self.required = bool(keys)  # without API keys no viewer needs a token
        self.signer = RoomTokenSigner(token_secret(keys))
        self.store = store
        self.max_per_room = max_per_room
        self.clock = clock

    async def issue(self, room: str, expires_in: int) -> IssuedToken | None:
        """A new token for ``room`` valid ``expires_in`` seconds (the caller bounds it);
        None when the room has its bound of live tokens."""
        now = int(self.clock())
        record = RoomTokenRecord(room, secrets.token_hex(8), now, now + int(expires_in))
        if not await self.store.add(record, self.max_per_room):
            return None
        return IssuedToken(record, self.signer.sign(room, record.token_id, record.expires_at))

    async def check(self, room: str, token: str | None) -> SignedToken | None:
        """What ``token`` says if it admits to ``room`` now (signed, unexpired, not
        revoked), else None. ``ViewerTokensUnavailable`` when the store cannot say."""
        if not looks_like_room_token(token):
            return None
        signed = self.signer.read(room, token)
        now = self.clock()
        if signed is None or signed.expires_at <= now:
            return None
        if not await self.store.active(room, signed.token_id, now):
            return None
        return signed

    async def issued(self, room: str) -> list[RoomTokenRecord]:
        return await self.store.issued(room, self.clock())

    async def revoke(self, room: str, token_id: str) -> bool:
        return await self.store.revoke(room, token_id)
