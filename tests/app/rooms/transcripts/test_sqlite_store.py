"""The SQLite transcript store on a real file: round trip, a restart, bounds, idempotent
writes, hostile text, and a data folder that cannot hold it."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts import store as store_module
from app.rooms.transcripts.sqlite_store import FILE_NAME, SqliteTranscriptStore, TranscriptDirError
from app.rooms.transcripts.store import TalkRecord, TranscriptLine, TranscriptUnavailable

ROOM = "keynote-1"
EPOCH = float(int(time.time()) - 86400)


def _talk(talk_id: str, started_at: float = 1000.0, room: str = ROOM,
          langs: tuple[str, ...] = ("de", "ja")) -> TalkRecord:
    """A talk ``started_at`` seconds after ``EPOCH`` (a day ago: inside the retention)."""
    return TalkRecord(room=room, talk_id=talk_id, started_at=EPOCH + started_at, langs=langs)


def _line(segment: int, text: str = "", source: str = "src") -> TranscriptLine:
    return TranscriptLine(segment=segment, start_s=segment * 2.0, end_s=segment * 2.0 + 1.5,
                          source=source, text=text or f"Satz {segment}")


def _open(tmp_path: Path, **bounds: float) -> SqliteTranscriptStore:
    return SqliteTranscriptStore(tmp_path / FILE_NAME, **bounds)


def test_lines_come_back_in_segment_order_per_language(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[TalkRecord], list[TranscriptLine], list[TranscriptLine]]:
        store = _open(tmp_path)
        try:
            await store.start_talk(_talk("a1"))
            for segment in (2, 0, 1):  # written out of order
                await store.add(ROOM, "a1", "de", _line(segment))
            await store.add(ROOM, "a1", "ja", _line(0, "文 0"))
            return (await store.talks(ROOM), await store.lines(ROOM, "a1", "de"),
                    await store.lines(ROOM, "a1", "ja"))
        finally:
            await store.close()

    talks, de, ja = asyncio.run(scenario())
    assert talks == [_talk("a1")]
    assert de == [_line(0), _line(1), _line(2)]
    assert ja == [_line(0, "文 0")]


def test_transcripts_survive_closing_and_reopening_the_file(tmp_path: Path) -> None:
    async def write() -> None:
        store = _open(tmp_path)
        await store.start_talk(_talk("a1", 1000.0))
        await store.start_talk(_talk("b2", 2000.0, langs=("fr",)))
        await store.add(ROOM, "a1", "de", _line(0))
        await store.add(ROOM, "b2", "fr", _line(0, "Phrase"))
        await store.close()

    async def read() -> tuple[list[TalkRecord], list[TranscriptLine], list[TranscriptLine]]:
        store = _open(tmp_path)
        try:
            return (await store.talks(ROOM), await store.lines(ROOM, "a1", "de"),
                    await store.lines(ROOM, "b2", "fr"))
        finally:
            await store.close()

    asyncio.run(write())
    talks, a1, b2 = asyncio.run(read())  # another event loop, another process's view
    assert [t.talk_id for t in talks] == ["a1", "b2"]  # oldest first
    assert talks[1].langs == ("fr",)
    assert a1 == [_line(0)] and b2 == [_line(0, "Phrase")]


def test_the_file_is_in_wal_mode_and_the_connection_stays_on_its_worker(
        tmp_path: Path) -> None:
    store = _open(tmp_path)
    with closing(sqlite3.connect(tmp_path / FILE_NAME)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # the event loop's thread never touches the connection: SQLite's own check says so
    conn = store._file._conn  # app.rooms.sqlite_file keeps it
    assert conn is not None
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
    asyncio.run(store.close())


def test_the_same_segment_twice_keeps_one_line(tmp_path: Path) -> None:
    async def scenario() -> list[TranscriptLine]:
        store = _open(tmp_path)
        try:
            await store.start_talk(_talk("a1"))
            await store.add(ROOM, "a1", "de", _line(0))
            await store.add(ROOM, "a1", "de", _line(0))  # a retry after an outage
            await store.add(ROOM, "a1", "de", _line(1))
            await store.add(ROOM, "a1", "de", _line(1, "Satz 1, wieder"))
            await store.start_talk(_talk("a1"))  # a repeated start changes nothing
            return await store.lines(ROOM, "a1", "de")
        finally:
            await store.close()

    assert asyncio.run(scenario()) == [_line(0), _line(1, "Satz 1, wieder")]


def test_a_room_keeps_its_newest_talks_and_their_lines_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "MAX_TALKS_PER_ROOM", 3)

    async def scenario() -> tuple[list[str], list[TranscriptLine], list[str], int]:
        store = _open(tmp_path)  # the bound is read when the store is made
        try:
            await store.start_talk(_talk("other", 1.0, room="other-room"))
            for i in range(5):
                await store.start_talk(_talk(f"t{i}", 1000.0 + i))
                await store.add(ROOM, f"t{i}", "de", _line(0))
            left = [t.talk_id for t in await store.talks(ROOM)]
            other = [t.talk_id for t in await store.talks("other-room")]
            gone = await store.lines(ROOM, "t0", "de")
        finally:
            await store.close()
        with closing(sqlite3.connect(tmp_path / FILE_NAME)) as db:
            (rows,) = db.execute("SELECT COUNT(*) FROM lines").fetchone()
        return left, gone, other, rows

    left, gone, other, rows = asyncio.run(scenario())
    assert left == ["t2", "t3", "t4"]
    assert gone == [] and rows == 3  # the old talks' lines went with them
    assert other == ["other"]  # the bound is per room


@pytest.mark.parametrize("days, kept", [(30.0, False), (0.0, True)], ids=["30-days", "keep"])
def test_talks_older_than_the_retention_are_gone_with_their_lines(
        tmp_path: Path, days: float, kept: bool) -> None:
    now = time.time()
    old = TalkRecord(room="old-room", talk_id="old", started_at=now - 31 * 86400,
                     langs=("de",))

    async def write() -> None:
        store = _open(tmp_path, retention_days=0)  # written while nothing expired
        try:
            await store.start_talk(old)
            await store.add("old-room", "old", "de", _line(0))
        finally:
            await store.close()

    async def read() -> tuple[list[TalkRecord], list[TalkRecord]]:
        store = _open(tmp_path, retention_days=days)  # start-up removes what expired
        try:
            listed = await store.talks("old-room")
            await store.start_talk(_talk("fresh"))
            return listed, await store.talks(ROOM)
        finally:
            await store.close()

    asyncio.run(write())
    listed, fresh = asyncio.run(read())
    with closing(sqlite3.connect(tmp_path / FILE_NAME)) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM lines WHERE talk_id = 'old'").fetchone()
    assert [t.talk_id for t in listed] == (["old"] if kept else [])
    assert rows == (1 if kept else 0)
    assert [t.talk_id for t in fresh] == ["fresh"]


def test_a_talk_that_ages_past_the_retention_is_no_longer_listed(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        store = _open(tmp_path, retention_days=30)
        try:
            await store.start_talk(_talk("a1"))
            before = [t.talk_id for t in await store.talks(ROOM)]
            store.retention_s = 3600.0  # as if a month had passed: it started a day ago
            return before, [t.talk_id for t in await store.talks(ROOM)]
        finally:
            await store.close()

    assert asyncio.run(scenario()) == (["a1"], [])


def test_a_full_transcript_refuses_new_lines_and_warns_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[TranscriptLine], list[TranscriptLine]]:
        store = _open(tmp_path, max_lines=3)
        try:
            await store.start_talk(_talk("a1"))
            for segment in range(6):
                await store.add(ROOM, "a1", "de", _line(segment))
            await store.add(ROOM, "a1", "de", _line(1, "neu"))  # a retry still replaces
            await store.add(ROOM, "a1", "ja", _line(0))  # another language has its own bound
            return await store.lines(ROOM, "a1", "de"), await store.lines(ROOM, "a1", "ja")
        finally:
            await store.close()

    with caplog.at_level(logging.WARNING, logger="livetrans.transcripts"):
        de, ja = asyncio.run(scenario())
    assert [line.segment for line in de] == [0, 1, 2] and de[1].text == "neu"
    assert len(ja) == 1
    warnings = [r for r in caplog.records if "not kept" in r.getMessage()]
    assert len(warnings) == 1 and ROOM not in warnings[0].getMessage()


def test_hostile_text_is_kept_bounded_and_storable(tmp_path: Path) -> None:
    hostile = "a --> b\n\nc\x00\x1b[31m\u2028" + "x" * 10_000
    lone = "bad \ud800 surrogate"

    async def scenario() -> list[TranscriptLine]:
        store = _open(tmp_path)
        try:
            await store.start_talk(_talk("a1"))
            await store.add(ROOM, "a1", "de", TranscriptLine(0, 0.0, 1.0, hostile, hostile))
            await store.add(ROOM, "a1", "de", TranscriptLine(1, float("nan"), -5.0, lone, lone))
            return await store.lines(ROOM, "a1", "de")
        finally:
            await store.close()

    first, second = asyncio.run(scenario())
    assert len(first.text) == len(first.source) == store_module.MAX_TEXT_CHARS
    assert first.text == hostile[:store_module.MAX_TEXT_CHARS]
    assert second.text == "bad \ufffd surrogate" and second.source == second.text
    assert (second.start_s, second.end_s) == (0.0, 0.0)  # times that are no times


def test_a_line_of_an_unknown_talk_records_the_talk_and_its_language(tmp_path: Path) -> None:
    async def scenario() -> list[TalkRecord]:
        store = _open(tmp_path)
        try:
            await store.add(ROOM, "lost", "de", _line(0))  # its start never arrived
            await store.start_talk(_talk("known", langs=("de",)))
            await store.add(ROOM, "known", "fr", _line(0))
            return await store.talks(ROOM)
        finally:
            await store.close()

    talks = {t.talk_id: t for t in asyncio.run(scenario())}
    assert talks["lost"].langs == ("de",)
    assert talks["known"].langs == ("de", "fr")


def test_a_closed_store_and_a_failing_disk_are_unavailable_not_crashes(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        store = _open(tmp_path)

        def broken(*_: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        store._talks = broken  # type: ignore[method-assign]
        with pytest.raises(TranscriptUnavailable, match="disk I/O error"):
            await store.talks(ROOM)
        await store.close()
        await store.close()  # twice is fine
        with pytest.raises(TranscriptUnavailable):
            await store.lines(ROOM, "a1", "de")

    asyncio.run(scenario())


def test_a_data_folder_that_cannot_be_made_is_named_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(TranscriptDirError) as info:
        open_transcripts(blocker / "data")
    message = str(info.value)
    assert isinstance(info.value, OSError)
    assert str(blocker / "data") in message and "\n" not in message


def test_a_data_folder_that_cannot_hold_the_file_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).mkdir()  # the database's name is taken by a folder
    with pytest.raises(TranscriptDirError) as info:
        open_transcripts(tmp_path)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_the_factory_makes_the_folder_and_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "data"
    store = open_transcripts(folder)
    assert isinstance(store, SqliteTranscriptStore)
    assert (folder / FILE_NAME).is_file()
    asyncio.run(store.close())


def test_the_transcript_writer_comes_back_after_a_bug(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception injected once into the writer's task: counted, the task back within
    its backoff, every line written once."""
    from app import supervision
    from app.rooms.outbox import Outbox
    from app.rooms.transcripts.recorder import TranscriptRecorder

    monkeypatch.setattr(supervision, "BACKOFF_S", (0.01,))
    original, fired = Outbox._set_up, []

    def once(self, up: bool, why: str = "") -> None:  # noqa: ANN001
        if not fired:
            fired.append(1)
            raise RuntimeError("injected")
        original(self, up, why)

    monkeypatch.setattr(Outbox, "_set_up", once)

    async def scenario() -> tuple[list[int], list[str]]:
        restarted: list[str] = []
        recorder = TranscriptRecorder(SqliteTranscriptStore(tmp_path / FILE_NAME),
                                      on_restart=restarted.append)
        await recorder.start()
        recorder.start_talk(TalkRecord(room="r", talk_id="t", started_at=time.time(),
                                       langs=("de",)))
        for seg in range(3):
            recorder.line("r", "t", "de", TranscriptLine(segment=seg, start_s=0, end_s=1,
                                                         source="s", text=f"x{seg}"))
        await asyncio.wait_for(recorder.written(), 10)
        lines = await recorder.store.lines("r", "t", "de")
        await recorder.close(1)
        return [line.segment for line in lines], restarted

    segments, restarted = asyncio.run(scenario())
    assert segments == [0, 1, 2] and restarted == ["transcript-writer"]
