"""A SQLite file kept by one worker thread: what every store of ``--data-dir`` shares.

One connection, used only from one worker thread: the event loop hands it each operation
(``run``) and never waits on the disk itself, and SQLite never sees two threads. WAL mode,
so a reader (a download) does not block the writer (the recorder) and a crash loses at
most the transactions not yet committed, never the file; ``synchronous=NORMAL`` is
durable across a crash in WAL mode. The file is opened at once (waiting), so a folder that
cannot hold it is refused at start-up with one line naming it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def one_line(exc: BaseException) -> str:
    """An error as one short line (no path noise from ``OSError``'s repr)."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return " ".join(text.split())[:200] or type(exc).__name__


class SqliteFile:
    """``path`` opened with ``schema`` on a worker thread of its own. ``what`` names the
    store in messages; ``dir_error`` is raised (one line) when the data folder cannot hold
    the file, ``unavailable`` (given the message) when an operation meets a locked or
    full disk; ``on_open`` (given this file) runs on the worker thread once the schema is in
    place."""

    def __init__(self, path: Path, schema: str, *, what: str,
                 dir_error: Callable[[str], OSError],
                 unavailable: Callable[[str], Exception],
                 on_open: Callable[[SqliteFile], None] | None = None) -> None:
        self.path = Path(path)
        self.what, self._unavailable = what, unavailable
        self._schema, self._on_open = schema, on_open
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise dir_error(f"{what}: cannot create the data folder {folder}: "
                            f"{one_line(exc)} (set --data-dir to a writable folder)") from None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=what.replace(" ", "-"))
        try:
            self._pool.submit(self._open).result()
        except (OSError, sqlite3.Error) as exc:
            self._pool.shutdown(wait=True)
            raise dir_error(f"{what}: cannot write {self.path.name} in the data folder "
                            f"{folder}: {one_line(exc)} (set --data-dir to a writable "
                            "folder)") from None

    # -- the worker thread ---------------------------------------------------------------
    def _open(self) -> None:
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(self._schema)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        if self._on_open is not None:
            self._on_open(self)

    @property
    def conn(self) -> sqlite3.Connection:
        """The connection (on the worker thread only)."""
        assert self._conn is not None
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (on the worker thread). A failed COMMIT (disk full)
        leaves the transaction open: the next write would find it, so it is rolled back
        whatever failed."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the event loop ------------------------------------------------------------------
    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the worker thread. A locked or full disk, an I/O error: the
        store's ``unavailable`` (its caller keeps the write and retries)."""
        if self._closed:
            raise self._unavailable(f"the {self.what} store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, functools.partial(fn, *args))
        except sqlite3.OperationalError as exc:
            raise self._unavailable(f"{self.what} {self.path.name}: {one_line(exc)}") from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._close)
        finally:
            self._pool.shutdown(wait=True)
