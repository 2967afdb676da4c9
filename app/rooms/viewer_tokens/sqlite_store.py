"""Room viewer tokens in a SQLite file (``--data-dir``/viewer-tokens.sqlite3): the store of
a server without a Redis room bus, kept across restarts.

Kept as transcripts are (``app.rooms.sqlite_file``: one worker thread, WAL), each write one
transaction. A file of its own, so its schema never waits on the transcripts'.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.rooms.sqlite_file import SqliteFile
from app.rooms.viewer_tokens.store import RoomTokenRecord, ViewerTokensUnavailable

FILE_NAME = "viewer-tokens.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS room_tokens (
    room TEXT NOT NULL,
    token_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (room, token_id)
);
CREATE INDEX IF NOT EXISTS room_tokens_by_expiry ON room_tokens (expires_at);
"""


class ViewerTokenDirError(OSError):
    """The data folder cannot hold the token file; one line naming it, for ``serve``."""


class SqliteViewerTokenStore:
    """``ViewerTokenStore`` on a SQLite file; survives a restart (open the same file)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = SqliteFile(self.path, _SCHEMA, what="viewer tokens",
                                dir_error=ViewerTokenDirError,
                                unavailable=ViewerTokensUnavailable)

    # -- the worker thread ---------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        return self._file.conn

    def _add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        with self._file.transaction() as conn:
            # expired tokens go whenever one is issued: the table holds live tokens only
            conn.execute("DELETE FROM room_tokens WHERE expires_at <= ?", (record.created_at,))
            (count,) = conn.execute("SELECT COUNT(*) FROM room_tokens WHERE room = ?",
                                    (record.room,)).fetchone()
            kept = count < max_per_room
            if kept:
                conn.execute("INSERT INTO room_tokens (room, token_id, created_at, expires_at)"
                             " VALUES (?, ?, ?, ?)", (record.room, record.token_id,
                                                      record.created_at, record.expires_at))
            return kept

    def _active(self, room: str, token_id: str, now: float) -> bool:
        row = self._db().execute(
            "SELECT 1 FROM room_tokens WHERE room = ? AND token_id = ? AND expires_at > ?",
            (room, token_id, now)).fetchone()
        return row is not None

    def _issued(self, room: str, now: float) -> list[RoomTokenRecord]:
        rows = self._db().execute(
            "SELECT token_id, created_at, expires_at FROM room_tokens WHERE room = ? AND "
            "expires_at > ? ORDER BY expires_at, token_id", (room, now)).fetchall()
        return [RoomTokenRecord(room, token_id, created, expires)
                for token_id, created, expires in rows]

    def _revoke(self, room: str, token_id: str) -> bool:
        cur = self._db().execute("DELETE FROM room_tokens WHERE room = ? AND token_id = ?",
                                 (room, token_id))
        return cur.rowcount > 0

    # -- the event loop ------------------------------------------------------------------
    async def add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        return await self._file.run(self._add, record, max_per_room)

    async def active(self, room: str, token_id: str, now: float) -> bool:
        return await self._file.run(self._active, room, token_id, now)

    async def issued(self, room: str, now: float) -> list[RoomTokenRecord]:
        return await self._file.run(self._issued, room, now)

    async def revoke(self, room: str, token_id: str) -> bool:
        return await self._file.run(self._revoke, room, token_id)

    async def close(self) -> None:
        await self._file.close()
