"""Room viewer tokens the operator issued and has not revoked: what every store (SQLite,
Redis) keeps and offers.

A signature (``app.rooms.viewer_tokens.signing``) says the server made a token; the store
says the operator still wants it. A token counts only while its record is here, so
revoking is deleting the record, and a record goes by itself when its token expires: the
store holds live tokens only, and a lost store revokes (never revives) tokens. Bounded:
``MAX_TOKENS_PER_ROOM`` live tokens a room (issuing one more is refused), each living at
most ``MAX_EXPIRES_IN_S``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

MAX_TOKENS_PER_ROOM = 100
MIN_EXPIRES_IN_S = 60
MAX_EXPIRES_IN_S = 366 * 86400  # a year and a day: a yearly event's posters
DEFAULT_EXPIRES_IN_S = 7 * 86400


@dataclass(frozen=True)
class RoomTokenRecord:
    """One issued room viewer token, as listed (never the token itself: it is a secret the
    operator was handed once)."""

    room: str
    token_id: str
    created_at: int  # unix seconds
    expires_at: int  # unix seconds


class ViewerTokensUnavailable(RuntimeError):
    """The store cannot be asked now (Redis away, the SQLite file locked): retry."""


class ViewerTokenStore(Protocol):
    async def add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        """Keep ``record``; False (nothing kept) when its room has ``max_per_room`` live
        tokens already."""
        ...

    async def active(self, room: str, token_id: str, now: float) -> bool:
        """Whether the token is issued for ``room``, not revoked and not expired."""
        ...

    async def issued(self, room: str, now: float) -> list[RoomTokenRecord]:
        """The room's live tokens, soonest to expire first."""
        ...

    async def revoke(self, room: str, token_id: str) -> bool:
        """Forget the token (it admits no one from now on); False if there was none."""
        ...

    async def close(self) -> None: ...
