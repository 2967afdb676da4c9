"""Room viewer tokens: a link to a room's caption screen that admits to every talk of the
room until it expires or the operator revokes it, so an organiser prints the audience's QR
codes ahead of the event (API.md, "Captions out").

``open_viewer_tokens`` picks the store as ``app.rooms.transcripts`` does: Redis when the
server shares its rooms on a Redis room bus (a revocation then holds on every replica),
else a SQLite file in ``--data-dir`` (kept across restarts).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.rooms.viewer_tokens.signing import looks_like_room_token, valid_token_id
from app.rooms.viewer_tokens.sqlite_store import (
    FILE_NAME,
    SqliteViewerTokenStore,
    ViewerTokenDirError,
)
from app.rooms.viewer_tokens.store import (
    DEFAULT_EXPIRES_IN_S,
    MAX_EXPIRES_IN_S,
    MAX_TOKENS_PER_ROOM,
    MIN_EXPIRES_IN_S,
    RoomTokenRecord,
    ViewerTokenStore,
    ViewerTokensUnavailable,
)
from app.rooms.viewer_tokens.tokens import IssuedToken, RoomViewerTokens

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["DEFAULT_EXPIRES_IN_S", "MAX_EXPIRES_IN_S", "MAX_TOKENS_PER_ROOM",
           "MIN_EXPIRES_IN_S", "IssuedToken", "RoomTokenRecord", "RoomViewerTokens",
           "ViewerTokenDirError", "ViewerTokenStore", "ViewerTokensUnavailable",
           "looks_like_room_token", "open_viewer_tokens", "valid_token_id"]


def open_viewer_tokens(data_dir: Path, redis_client: redis.asyncio.Redis | None = None,
                       prefix: str = "livetrans", *,
                       replicated: bool = False) -> ViewerTokenStore:
    """The token store: on Redis with ``redis_client`` (keys under ``prefix``; the client
    stays its owner's), else SQLite at ``data_dir/viewer-tokens.sqlite3``, making the
    folder (``ViewerTokenDirError`` when it cannot)."""
    if redis_client is not None:
        from app.rooms.viewer_tokens.redis_store import RedisViewerTokenStore

        return RedisViewerTokenStore(redis_client, prefix, replicated=replicated)
    return SqliteViewerTokenStore(Path(data_dir).expanduser() / FILE_NAME)
