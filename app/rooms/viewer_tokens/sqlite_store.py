"""Room viewer tokens in a SQLite file (``--data-dir``/viewer-tokens.sqlite3): the store of
a server without a Redis room bus, kept across restarts.

As for transcripts (``app.rooms.transcripts.sqlite_store``): one connection, used only from
one worker thread, WAL mode, each write one transaction. A file of its own, so its schema
never waits on the transcripts'.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from app.rooms.viewer_tokens.store import RoomTokenRecord, ViewerTokensUnavailable

T = TypeVar("T")

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
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer-tokens")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._pool.submit(self._open).result()
        except (OSError, sqlite3.Error) as exc:
            self._pool.shutdown(wait=True)
            text = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise ViewerTokenDirError(
                f"viewer tokens: cannot write {self.path.name} in the data folder "
                f"{self.path.parent}: {text} (set --data-dir to a writable folder)") from None

    # -- the worker thread ---------------------------------------------------------------
    def _open(self) -> None:
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _db(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    def _add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            # expired tokens go whenever one is issued: the table holds live tokens only
            conn.execute("DELETE FROM room_tokens WHERE expires_at <= ?", (record.created_at,))
            (count,) = conn.execute("SELECT COUNT(*) FROM room_tokens WHERE room = ?",
                                    (record.room,)).fetchone()
            kept = count < max_per_room
            if kept:
                conn.execute("INSERT INTO room_tokens (room, token_id, created_at, expires_at)"
                             " VALUES (?, ?, ?, ?)", (record.room, record.token_id,
                                                      record.created_at, record.expires_at))
            conn.execute("COMMIT")
            return kept
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

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

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the event loop ------------------------------------------------------------------
    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise ViewerTokensUnavailable("the viewer token store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args))
        except sqlite3.OperationalError as exc:  # locked, disk full, I/O error: retry
            text = " ".join(str(exc).split())[:200]
            raise ViewerTokensUnavailable(f"viewer tokens {self.path.name}: {text}") from None

    async def add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        return await self._run(self._add, record, max_per_room)

    async def active(self, room: str, token_id: str, now: float) -> bool:
        return await self._run(self._active, room, token_id, now)

    async def issued(self, room: str, now: float) -> list[RoomTokenRecord]:
        return await self._run(self._issued, room, now)

    async def revoke(self, room: str, token_id: str) -> bool:
        return await self._run(self._revoke, room, token_id)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._close)
        finally:
            self._pool.shutdown(wait=True)
