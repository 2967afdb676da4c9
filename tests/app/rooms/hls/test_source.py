"""Where a talk's HLS subtitles come from, over a real SQLite store and a real Redis:
a running talk then its end, the shared live edge, one read of the talks for many players
(``app.rooms.hls.source``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import m3u8
import redis.asyncio as aioredis
import webvtt

from app.rooms.bus.local import LocalBus
from app.rooms.hls.source import HlsSource, MemoryEdgeMarks, RedisEdgeMarks, TalkView
from app.rooms.hls.timeline import SETTLE_S, HlsTiming
from app.rooms.registry import RoomRegistry
from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts.store import TalkRecord, TranscriptLine
from tests.redis_server import redis_server

T = HlsTiming(segment_s=2, window_s=6)


def line(segment: int, start: float, end: float, text: str = "") -> TranscriptLine:
    return TranscriptLine(segment, start, end, f"src {segment}", text or f"cue {segment}")


# -- the source over real stores -----------------------------------------------------------
ROOM, TALK = "keynote-1", "00000000000000aa"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _source(store, marks, clock: Clock, rooms: RoomRegistry | None = None) -> HlsSource:
    return HlsSource(rooms or RoomRegistry(), LocalBus(), store, T, marks, clock=clock)


def test_a_running_talk_then_its_end_over_sqlite(tmp_path: Path) -> None:
    async def run() -> None:
        store = open_transcripts(tmp_path)
        t0 = float(int(time.time()) - 1000)  # inside the retention
        record = TalkRecord(ROOM, TALK, t0, ("de",))
        await store.start_talk(record)
        rooms = RoomRegistry()
        speaker = object()
        rooms.claim(ROOM, speaker, ["de"], talk_id=TALK, started_at=t0)
        clock = Clock(t0 + 20.0)
        source = _source(store, MemoryEdgeMarks(), clock, rooms)
        records, running = await source.talks(ROOM)
        assert [r.talk_id for r in records] == [TALK] and running == TALK
        for seg in range(4):
            await store.add(ROOM, TALK, "de", line(seg, seg * 3.0, seg * 3.0 + 1.0))
        view = await source.talk(ROOM, TALK)
        assert view == TalkView(record, True)
        text, ended_now = await source.playlist(view, "de", lambda i: f"{i}.vtt")
        live = m3u8.loads(text)
        assert not ended_now
        published = T.published(20.0)
        assert not live.is_endlist
        assert live.media_sequence == published - 3 and len(live.segments) == 3
        assert await source.segment(view, "de", published, 0.0) is None  # not yet
        seg0 = await source.segment(view, "de", 0, 0.0)
        assert [c.text for c in webvtt.from_string(seg0).captions] == ["cue 0"]
        # the talk ends at 20 s, quiet since 10 s: the ended playlist still reaches as far
        # as the live one did, and lists every segment from 0
        rooms.release(rooms.rooms[ROOM], speaker)
        ended_view = await source.talk(ROOM, TALK)
        assert ended_view == TalkView(record, False)
        # just ended: its last finals may still be on their way, players stay live a bit
        for later in (0.0, 1.0, 3.0):  # polled meanwhile, it neither grows nor lasts
            clock.now = t0 + 20.0 + later
            text, ended_now = await source.playlist(ended_view, "de", lambda i: f"{i}.vtt")
            grace = m3u8.loads(text)
            assert not ended_now and not grace.is_endlist
            assert grace.media_sequence + len(grace.segments) == published
        clock.now = t0 + 20.0 + T.segment_s + SETTLE_S + T.segment_s
        text, ended_now = await source.playlist(ended_view, "de", lambda i: f"{i}.vtt")
        assert ended_now
        clock.now = t0 + 600.0
        ended = m3u8.loads((await source.playlist(ended_view, "de", lambda i: f"{i}.vtt"))[0])
        assert ended.is_endlist and ended.media_sequence == 0
        assert len(ended.segments) == published
        # a published segment is the same bytes, live or after the end
        assert await source.segment(ended_view, "de", 0, 0.0) == seg0
        cues = set()
        for i in range(len(ended.segments)):
            text = await source.segment(ended_view, "de", i, 0.0)
            cues |= {(c.identifier, c.start, c.end) for c in webvtt.from_string(text).captions}
        assert cues == {(str(s), f"00:00:{s * 3:02d}.000", f"00:00:{s * 3 + 1:02d}.000")
                        for s in range(4)}
        assert await source.segment(ended_view, "de", len(ended.segments), 0.0) is None
        await store.close()

    asyncio.run(run())


def test_the_live_edge_on_redis_is_shared_and_only_grows(tmp_path: Path) -> None:
    async def run(url: str) -> None:
        client = aioredis.from_url(url, decode_responses=True)
        one, two = RedisEdgeMarks(client, "t", ttl_s=60), RedisEdgeMarks(client, "t")
        assert await one.get(ROOM, TALK) == 0.0
        await one.raise_to(ROOM, TALK, 12.0)
        await two.raise_to(ROOM, TALK, 8.0)  # another replica, behind: no change
        assert await two.get(ROOM, TALK) == 12.0
        assert 0 < await client.pttl(f"t:hls-edge:{ROOM}:{TALK}") <= 60_000
        await client.aclose()

    with redis_server(tmp_path) as redis:
        asyncio.run(run(redis.url))


def test_players_refreshing_at_once_share_one_read_of_the_talks(tmp_path: Path) -> None:
    """A crowd of players asks a room's playlist at once: one read of its talks is in
    flight, the rest share its answer; the next refresh reads again (nothing stale kept)."""
    async def run() -> tuple[int, int, set[tuple[str, ...]]]:
        store = open_transcripts(tmp_path)
        t0 = float(int(time.time()) - 1000)
        await store.start_talk(TalkRecord(ROOM, TALK, t0, ("de",)))
        reads = 0
        talks = store.talks

        async def counted(room: str):  # noqa: ANN202 - the store's own answer, counted
            nonlocal reads
            reads += 1
            return await talks(room)

        store.talks = counted  # type: ignore[method-assign]
        source = _source(store, MemoryEdgeMarks(), Clock(t0 + 20.0))
        answers = await asyncio.gather(*(source.talks(ROOM) for _ in range(50)))
        first = reads
        await source.talks(ROOM)
        return first, reads, {tuple(r.talk_id for r in got) for got, _ in answers}

    first, after, seen = asyncio.run(run())
    assert first == 1 and after == 2 and seen == {(TALK,)}
