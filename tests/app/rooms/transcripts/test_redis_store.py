"""The Redis transcript store against Debian's redis-server on loopback: round trip, a new
client and a restarted (persistent) Redis, bounds, idempotent writes, keys under the
prefix, and a Redis that is away (``TranscriptUnavailable``, then it works again)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts import store as store_module
from app.rooms.transcripts.redis_store import RedisTranscriptStore
from app.rooms.transcripts.store import TalkRecord, TranscriptLine, TranscriptUnavailable
from tests.redis_server import RedisServer, redis_server

ROOM = "keynote-1"
EPOCH = float(int(time.time()) - 86400)


@pytest.fixture()
def redis(tmp_path: Path):
    with redis_server(tmp_path / "redis") as server:
        yield server


def _client(url: str, decode: bool = True) -> aioredis.Redis:
    return aioredis.Redis.from_url(url, decode_responses=decode, socket_connect_timeout=2,
                                   socket_timeout=5)


def _talk(talk_id: str, started_at: float = 1000.0, room: str = ROOM,
          langs: tuple[str, ...] = ("de", "ja")) -> TalkRecord:
    """A talk ``started_at`` seconds after ``EPOCH`` (a day ago: inside the retention)."""
    return TalkRecord(room=room, talk_id=talk_id, started_at=EPOCH + started_at, langs=langs)


def _line(segment: int, text: str = "") -> TranscriptLine:
    return TranscriptLine(segment=segment, start_s=segment * 2.0, end_s=segment * 2.0 + 1.5,
                          source="src", text=text or f"Satz {segment}")


@pytest.mark.parametrize("decode", [True, False], ids=["str-replies", "bytes-replies"])
def test_lines_come_back_in_segment_order_per_language(redis: RedisServer,
                                                       decode: bool) -> None:
    async def scenario() -> tuple[list[TalkRecord], list[TranscriptLine], list[TranscriptLine]]:
        client = _client(redis.url, decode)
        store = RedisTranscriptStore(client)
        try:
            await store.start_talk(_talk("a1"))
            for segment in (10, 2, 0, 1):  # out of order; 10 sorts after 2 as a number
                await store.add(ROOM, "a1", "de", _line(segment))
            await store.add(ROOM, "a1", "ja", _line(0, "文 0"))
            return (await store.talks(ROOM), await store.lines(ROOM, "a1", "de"),
                    await store.lines(ROOM, "a1", "ja"))
        finally:
            await client.aclose()

    talks, de, ja = asyncio.run(scenario())
    assert talks == [_talk("a1")]
    assert de == [_line(0), _line(1), _line(2), _line(10)]
    assert ja == [_line(0, "文 0")]


def test_transcripts_are_read_back_by_a_new_client_and_after_a_redis_restart(
        tmp_path: Path) -> None:
    async def write(url: str) -> None:
        client = _client(url)
        store = open_transcripts(tmp_path, client)
        await store.start_talk(_talk("a1", 1000.0))
        await store.start_talk(_talk("b2", 2000.0, langs=("fr",)))
        await store.add(ROOM, "a1", "de", _line(0))
        await store.add(ROOM, "b2", "fr", _line(0, "Phrase"))
        await store.close()  # the client is not the store's: it stays open
        assert await client.ping()
        await client.aclose()

    async def read(url: str) -> tuple[list[TalkRecord], list[TranscriptLine]]:
        client = _client(url)
        store = RedisTranscriptStore(client)
        try:
            return await store.talks(ROOM), await store.lines(ROOM, "b2", "fr")
        finally:
            await client.aclose()

    with redis_server(tmp_path / "redis", persist=True) as server:
        asyncio.run(write(server.url))
        for _ in range(2):
            talks, lines = asyncio.run(read(server.url))
            assert [t.talk_id for t in talks] == ["a1", "b2"]
            assert talks[1] == _talk("b2", 2000.0, langs=("fr",))
            assert lines == [_line(0, "Phrase")]
            server.stop()  # a restart: the append-only file brings it all back
            server.start()


def test_the_same_segment_twice_keeps_one_line(redis: RedisServer) -> None:
    async def scenario() -> list[TranscriptLine]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client)
        try:
            await store.start_talk(_talk("a1"))
            await store.add(ROOM, "a1", "de", _line(0))
            await store.add(ROOM, "a1", "de", _line(0))  # a retry after an outage
            await store.add(ROOM, "a1", "de", _line(1))
            await store.add(ROOM, "a1", "de", _line(1, "Satz 1, wieder"))
            await store.start_talk(_talk("a1"))
            return await store.lines(ROOM, "a1", "de")
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == [_line(0), _line(1, "Satz 1, wieder")]


def test_a_room_keeps_its_newest_talks_and_nothing_of_the_others(
        redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "MAX_TALKS_PER_ROOM", 3)

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client, prefix="lt")
        try:
            await store.start_talk(_talk("other", 1.0, room="other-room"))
            for i in range(5):
                await store.start_talk(_talk(f"t{i}", 1000.0 + i))
                await store.add(ROOM, f"t{i}", "de", _line(0))
                await store.add(ROOM, f"t{i}", "ja", _line(0))
            left = [t.talk_id for t in await store.talks(ROOM)]
            other = [t.talk_id for t in await store.talks("other-room")]
            keys = sorted(await client.keys("*"))
            return left, other, keys
        finally:
            await client.aclose()

    left, other, keys = asyncio.run(scenario())
    assert left == ["t2", "t3", "t4"] and other == ["other"]
    assert all(key.startswith("lt:") for key in keys)
    assert not any(":t0" in key or ":t1" in key for key in keys)  # their lines went too
    assert sum(":transcript:" in key for key in keys) == 6  # 3 talks x 2 languages


def test_every_key_expires_and_old_talks_leave_the_room(redis: RedisServer) -> None:
    now = time.time()

    async def scenario() -> tuple[list[int], list[str], list[str], list[str]]:
        client = _client(redis.url)
        try:
            keep = RedisTranscriptStore(client, prefix="lt", retention_days=0)
            await keep.start_talk(TalkRecord(ROOM, "old", now - 31 * 86400, ("de",)))
            await keep.add(ROOM, "old", "de", _line(0))
            store = RedisTranscriptStore(client, prefix="lt", retention_days=30)
            hidden = [t.talk_id for t in await store.talks(ROOM)]  # listed by start time
            await store.start_talk(_talk("fresh", langs=("de",)))
            await store.add(ROOM, "fresh", "de", _line(0))
            ttls = [await client.pttl(key) for key in await client.keys("lt:*:fresh*")]
            ttls.append(await client.pttl(f"lt:talks:{ROOM}"))
            members = await client.zrange(f"lt:talks:{ROOM}", 0, -1)
            left = [t.talk_id for t in await store.talks(ROOM)]
            return ttls, hidden, members, left
        finally:
            await client.aclose()

    ttls, hidden, members, left = asyncio.run(scenario())
    month_ms = 30 * 86400 * 1000
    assert len(ttls) == 3 and all(month_ms - 60_000 < ttl <= month_ms for ttl in ttls)
    assert hidden == []  # past the retention: not served, even before Redis expires it
    assert members == ["fresh"] and left == ["fresh"]  # a new talk drops it from the room


def test_a_full_transcript_refuses_new_lines_and_warns_once(
        redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[TranscriptLine]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client, max_lines=3)
        try:
            await store.start_talk(_talk("a1"))
            for segment in range(6):
                await store.add(ROOM, "a1", "de", _line(segment))
            await store.add(ROOM, "a1", "de", _line(1, "neu"))  # a retry still replaces
            return await store.lines(ROOM, "a1", "de")
        finally:
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="livetrans.transcripts"):
        lines = asyncio.run(scenario())
    assert [line.segment for line in lines] == [0, 1, 2] and lines[1].text == "neu"
    assert len([r for r in caplog.records if "not kept" in r.getMessage()]) == 1


def test_hostile_text_is_kept_bounded(redis: RedisServer) -> None:
    hostile = "a --> b\n\nc\x00\x1b[31m\u2028\"}" + "x" * 10_000

    async def scenario() -> list[TranscriptLine]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client)
        try:
            await store.add(ROOM, "a1", "de", TranscriptLine(0, 0.0, 1.0, hostile, hostile))
            await store.add(ROOM, "a1", "de", TranscriptLine(1, 1.0, 2.0, "\ud800", "\ud800"))
            return await store.lines(ROOM, "a1", "de")
        finally:
            await client.aclose()

    first, second = asyncio.run(scenario())
    assert first.text == first.source == hostile[:store_module.MAX_TEXT_CHARS]
    assert second.text == "\ufffd"


def test_a_redis_that_lost_the_talk_still_keeps_its_lines(redis: RedisServer) -> None:
    """Redis restarted empty mid-talk (no persistence): the next line records the talk."""
    async def scenario() -> tuple[list[TalkRecord], list[TranscriptLine]]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client)
        try:
            await store.start_talk(_talk("a1", langs=("de",)))
            await store.add(ROOM, "a1", "de", _line(0))
            await client.flushall()
            await store.add(ROOM, "a1", "de", _line(1))
            await store.add(ROOM, "a1", "fr", _line(1))
            return await store.talks(ROOM), await store.lines(ROOM, "a1", "de")
        finally:
            await client.aclose()

    talks, lines = asyncio.run(scenario())
    assert [(t.talk_id, t.langs) for t in talks] == [("a1", ("de", "fr"))]
    assert lines == [_line(1)]


def test_a_redis_that_is_away_is_unavailable_until_it_returns(redis: RedisServer) -> None:
    async def scenario() -> list[TranscriptLine]:
        client = _client(redis.url)
        store = RedisTranscriptStore(client)
        try:
            await store.start_talk(_talk("a1"))
            redis.stop()
            for call in (store.start_talk(_talk("b2")), store.talks(ROOM),
                         store.lines(ROOM, "a1", "de"), store.add(ROOM, "a1", "de", _line(0))):
                with pytest.raises(TranscriptUnavailable, match="Redis"):
                    await call
            redis.start()  # empty again: no persistence in this test
            await store.add(ROOM, "a1", "de", _line(0))  # the retry lands
            return await store.lines(ROOM, "a1", "de")
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == [_line(0)]


def test_the_factory_picks_redis_when_given_a_client(redis: RedisServer,
                                                     tmp_path: Path) -> None:
    async def scenario() -> None:
        client = _client(redis.url)
        store = open_transcripts(tmp_path / "unused", client, prefix="p1")
        assert isinstance(store, RedisTranscriptStore) and store.prefix == "p1"
        await client.aclose()

    asyncio.run(scenario())
    assert not (tmp_path / "unused").exists()  # no SQLite file made beside Redis
