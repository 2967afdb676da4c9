"""Transcripts in a SQLite file (``--data-dir``/transcripts.sqlite3): the default store of a
server without a room bus.

The file is kept by one worker thread (``app.rooms.sqlite_file``: WAL, one connection).
Each write is one transaction: a line and the bound it is checked against cannot disagree.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path

import app.rooms.transcripts.store as bounds
from app.rooms.sqlite_file import SqliteFile
from app.rooms.transcripts.store import (
    FullWarnings,
    TalkRecord,
    TranscriptLine,
    TranscriptUnavailable,
    clean_epoch,
    clean_langs,
    clean_line,
)

log = logging.getLogger("livetrans.transcripts")

FILE_NAME = "transcripts.sqlite3"
SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS talks (
    room TEXT NOT NULL,
    talk_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    langs TEXT NOT NULL,            -- JSON list of language codes
    PRIMARY KEY (room, talk_id)
);
CREATE INDEX IF NOT EXISTS talks_by_start ON talks (room, started_at);
CREATE INDEX IF NOT EXISTS talks_by_age ON talks (started_at);
CREATE TABLE IF NOT EXISTS lines (
    room TEXT NOT NULL,
    talk_id TEXT NOT NULL,
    lang TEXT NOT NULL,
    segment INTEGER NOT NULL,
    start_s REAL NOT NULL,
    end_s REAL NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (room, talk_id, lang, segment)
);
"""


class TranscriptDirError(OSError):
    """The data folder cannot hold the transcripts (cannot be made, or not writable); the
    message is one line naming the folder, fit for ``serve`` to print and exit."""


class SqliteTranscriptStore:
    """``TranscriptStore`` on a SQLite file; survives a restart (open the same file)."""

    def __init__(self, path: Path, *, max_talks: int | None = None,
                 max_lines: int | None = None,
                 retention_days: float | None = bounds.DEFAULT_RETENTION_DAYS) -> None:
        self.path = Path(path)
        self.retention_s = bounds.retention_seconds(retention_days)
        self.max_talks = max_talks if max_talks is not None else bounds.MAX_TALKS_PER_ROOM
        self.max_lines = max_lines if max_lines is not None else bounds.MAX_LINES_PER_TALK
        self._full = FullWarnings(log)
        self._file = SqliteFile(self.path, _SCHEMA, what="transcripts",
                                dir_error=TranscriptDirError,
                                unavailable=TranscriptUnavailable, on_open=self._opened)

    # -- the worker thread ---------------------------------------------------------------
    def _opened(self, file: SqliteFile) -> None:
        file.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        with file.transaction() as tx:
            self._expire(tx)

    def _expire(self, conn: sqlite3.Connection) -> None:
        """Talks older than the retention go, with their lines (at start-up and whenever
        a talk begins: the ``talks_by_age`` index makes it cheap)."""
        cutoff = bounds.expired_before(self.retention_s)
        if cutoff == float("-inf"):
            return
        conn.execute("DELETE FROM lines WHERE (room, talk_id) IN "
                     "(SELECT room, talk_id FROM talks WHERE started_at < ?)", (cutoff,))
        conn.execute("DELETE FROM talks WHERE started_at < ?", (cutoff,))

    def _evict(self, conn: sqlite3.Connection, room: str) -> None:
        """Past ``max_talks`` talks in ``room``, the oldest go, with their lines."""
        old = conn.execute(
            "SELECT talk_id FROM talks WHERE room = ? ORDER BY started_at DESC, rowid DESC "
            "LIMIT -1 OFFSET ?", (room, self.max_talks)).fetchall()
        for (talk_id,) in old:
            conn.execute("DELETE FROM lines WHERE room = ? AND talk_id = ?", (room, talk_id))
            conn.execute("DELETE FROM talks WHERE room = ? AND talk_id = ?", (room, talk_id))

    def _touch_talk(self, conn: sqlite3.Connection, room: str, talk_id: str,
                    started_at: float, langs: tuple[str, ...]) -> None:
        """Record the talk, or add languages it did not have yet."""
        row = conn.execute("SELECT langs FROM talks WHERE room = ? AND talk_id = ?",
                           (room, talk_id)).fetchone()
        if row is None:
            conn.execute("INSERT INTO talks (room, talk_id, started_at, langs) "
                         "VALUES (?, ?, ?, ?)",
                         (room, talk_id, started_at, json.dumps(list(clean_langs(langs)))))
            self._evict(conn, room)
            self._expire(conn)
            return
        known = tuple(json.loads(row[0]))
        merged = clean_langs(known, langs)
        if merged != known:
            conn.execute("UPDATE talks SET langs = ? WHERE room = ? AND talk_id = ?",
                         (json.dumps(list(merged)), room, talk_id))

    def _start_talk(self, talk: TalkRecord) -> None:
        with self._file.transaction() as conn:
            self._touch_talk(conn, talk.room, talk.talk_id, clean_epoch(talk.started_at),
                             tuple(talk.langs))

    def _add(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> bool:
        """Keep the line (replacing an earlier one of its segment); False when the talk's
        transcript in ``lang`` is full."""
        with self._file.transaction() as conn:
            # a line of a talk this store never saw (a start lost with a disk error): keep
            # it under a talk started as long ago as the line says
            self._touch_talk(conn, room, talk_id, time.time() - line.end_s, (lang,))
            key = (room, talk_id, lang, line.segment)
            exists = conn.execute(
                "SELECT 1 FROM lines WHERE room = ? AND talk_id = ? AND lang = ? "
                "AND segment = ?", key).fetchone()
            if exists is None:
                (count,) = conn.execute(
                    "SELECT COUNT(*) FROM lines WHERE room = ? AND talk_id = ? AND lang = ?",
                    key[:3]).fetchone()
                if count >= self.max_lines:
                    return False
            conn.execute(
                "INSERT INTO lines (room, talk_id, lang, segment, start_s, end_s, source, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (room, talk_id, lang, segment) "
                "DO UPDATE SET start_s = excluded.start_s, end_s = excluded.end_s, "
                "source = excluded.source, text = excluded.text",
                (*key, line.start_s, line.end_s, line.source, line.text))
            return True

    def _talks(self, room: str) -> list[TalkRecord]:
        rows = self._file.conn.execute(
            "SELECT talk_id, started_at, langs FROM talks WHERE room = ? AND started_at >= ? "
            "ORDER BY started_at, rowid",
            (room, bounds.expired_before(self.retention_s))).fetchall()
        return [TalkRecord(room=room, talk_id=talk_id, started_at=started_at,
                           langs=tuple(json.loads(langs))) for talk_id, started_at, langs in rows]

    def _lines(self, room: str, talk_id: str, lang: str) -> list[TranscriptLine]:
        rows = self._file.conn.execute(
            "SELECT segment, start_s, end_s, source, text FROM lines "
            "WHERE room = ? AND talk_id = ? AND lang = ? ORDER BY segment",
            (room, talk_id, lang)).fetchall()
        return [TranscriptLine(*row) for row in rows]

    # -- the event loop ------------------------------------------------------------------
    async def start_talk(self, talk: TalkRecord) -> None:
        await self._file.run(self._start_talk, talk)

    async def add(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None:
        if not await self._file.run(self._add, room, talk_id, lang, clean_line(line)):
            self._full.refused(room, talk_id, lang, self.max_lines)

    async def talks(self, room: str) -> list[TalkRecord]:
        return await self._file.run(self._talks, room)

    async def lines(self, room: str, talk_id: str, lang: str) -> list[TranscriptLine]:
        return await self._file.run(self._lines, room, talk_id, lang)

    async def close(self) -> None:
        await self._file.close()
