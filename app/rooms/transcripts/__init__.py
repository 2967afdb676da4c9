"""Durable talk transcripts: every final caption of a room's talk, per language, timed from
the talk's start (API.md, "Transcripts").

``open_transcripts`` picks the store: Redis when the server shares its rooms on a Redis room
bus (every replica then serves every transcript), else a SQLite file in ``--data-dir``.
``app.rooms.transcripts.recorder`` writes to it without making the speaker wait;
``app.rooms.transcripts.formats`` renders a transcript for download.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.rooms.transcripts.sqlite_store import FILE_NAME, SqliteTranscriptStore, TranscriptDirError
from app.rooms.transcripts.store import (
    DEFAULT_RETENTION_DAYS,
    TalkRecord,
    TranscriptLine,
    TranscriptStore,
    TranscriptUnavailable,
)

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["TalkRecord", "TranscriptDirError", "TranscriptLine", "TranscriptStore",
           "TranscriptUnavailable", "open_transcripts"]


def open_transcripts(data_dir: Path, redis_client: redis.asyncio.Redis | None = None,
                     prefix: str = "livetrans", *,
                     retention_days: float | None = DEFAULT_RETENTION_DAYS,
                     replicated: bool = False) -> TranscriptStore:
    """The transcript store: on Redis with ``redis_client`` (keys under ``prefix``; the
    client stays its owner's to close), else SQLite at ``data_dir/transcripts.sqlite3``,
    making the folder; talks are kept ``retention_days`` after they start (0: until their
    room's newer talks push them out). ``replicated``: Redis is a Sentinel-managed primary,
    so a line is written until a replica has it too (a failover keeps it). A folder that
    cannot hold it raises ``TranscriptDirError`` (an ``OSError``) with one line naming it."""
    if redis_client is not None:
        from app.rooms.transcripts.redis_store import RedisTranscriptStore

        return RedisTranscriptStore(redis_client, prefix, retention_days=retention_days,
                                    replicated=replicated)
    return SqliteTranscriptStore(Path(data_dir).expanduser() / FILE_NAME,
                                 retention_days=retention_days)
