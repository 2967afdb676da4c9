"""The HLS subtitle rendition's logic without a server or a model: which cues a segment
holds and when it is published, the WebVTT and playlist text (read back by ``webvtt-py`` and
``m3u8``), the timestamp map, and the source over a real SQLite store and a real Redis
(``app.rooms.hls``, ``app.rooms.hls_source``)."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import m3u8
import pytest
import redis.asyncio as aioredis
import webvtt

from app.rooms.bus.local import LocalBus
from app.rooms.hls import (
    ENDED_MAX_SEGMENTS,
    MAX_OFFSET_S,
    SETTLE_S,
    HlsTiming,
    clean_offset,
    cues_of,
    ended_range,
    live_range,
    render_playlist,
    render_segment,
    timestamp_map,
)
from app.rooms.hls_source import HlsSource, MemoryEdgeMarks, RedisEdgeMarks, TalkView
from app.rooms.registry import RoomRegistry
from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts.formats import MIN_CUE_MS, reading_ms, timed_cues
from app.rooms.transcripts.store import TalkRecord, TranscriptLine
from tests.redis_server import redis_server

T = HlsTiming(segment_s=2, window_s=6)


def line(segment: int, start: float, end: float, text: str = "") -> TranscriptLine:
    return TranscriptLine(segment, start, end, f"src {segment}", text or f"cue {segment}")


# -- the timeline ------------------------------------------------------------------------
def test_a_segment_is_published_one_segment_and_a_settle_after_its_window() -> None:
    assert T.published(0.0) == 0
    first = 2 * T.segment_s + SETTLE_S  # window [0, 2) + a hold of 2 s + the settle
    assert T.ready_at(0) == first
    assert T.published(first - 0.001) == 0 and T.published(first) == 1
    assert T.published(first + 2) == 2
    assert T.published(float("nan")) == 0 and T.published(-5.0) == 0


def test_a_cue_is_in_every_segment_it_overlaps_once_its_final_is_known() -> None:
    cues = cues_of([line(0, 0.5, 1.0), line(1, 1.5, 4.5), line(2, 4.0, 9.0)])
    in_seg = {i: [c.segment for c in T.in_segment(cues, i)] for i in range(6)}
    # cue 1 (1.5-4.5 s) overlaps windows 0, 1 and 2; its final (4.5 s) came after window
    # 0's end plus the hold (4 s), within window 1's (6 s): it is in segments 1 and 2.
    # Cue 2 (4-9 s): its final came after window 2's hold (8 s), so it is in 3 and 4 only.
    assert in_seg == {0: [0], 1: [1], 2: [1], 3: [2], 4: [2], 5: []}
    # (segment 0 is out at 5 s: the settle is the margin for the write, not more hold)


def test_every_cue_is_in_the_segment_where_it_ends() -> None:
    rng = random.Random(7)
    lines = []
    for seg in range(300):
        start = rng.uniform(0, 600)
        lines.append(line(seg, start, start + rng.choice([0, 0.2, 1, 3, 9, 30])))
    cues = cues_of(lines)
    total = T.ended_count(0.0, cues)
    held = {c.segment for i in range(total) for c in T.in_segment(cues, i)}
    assert held == set(range(300))
    for cue in cues:  # the segment of its end holds it (once every cue is known, with the
        # transcript's times)
        index = (cue.end_ms - 1) // (T.segment_s * 1000)
        assert cue.segment in {c.segment for c in T.in_segment(cues, index)}
    assert [(c.start_ms, c.end_ms) for c in cues] == [(s, e) for *_, s, e in timed_cues(lines)]


def test_live_and_ended_ranges() -> None:
    assert T.window_segments == 3
    assert HlsTiming(4, 60).window_segments == 15
    assert HlsTiming(10, 5).window_segments == 3  # never fewer than three
    assert live_range(T, 0) == (0, 0) and live_range(T, 2) == (0, 2)
    assert live_range(T, 10) == (7, 3)
    assert ended_range(10) == (0, 10)
    assert ended_range(ENDED_MAX_SEGMENTS + 5) == (5, ENDED_MAX_SEGMENTS)
    cues = cues_of([line(0, 0.0, 3.1)])
    assert T.ended_count(0.0, cues) == 2  # the last cue ends in window 1
    assert T.ended_count(20.0, cues) == 10  # a live playlist reached 20 s: never shorter
    assert T.ended_count(0.0, []) == 0
    with pytest.raises(ValueError):
        HlsTiming(0, 60)


# -- the texts -----------------------------------------------------------------------------
def test_a_segment_is_webvtt_with_the_timestamp_map_and_escaped_cues() -> None:
    cues = cues_of([line(3, 1.25, 1.25, "a <b> & --> c\nd"), line(4, 2.0, 3.0, " \n ")])
    text = render_segment(T.in_segment(cues, 0), 1.5)
    assert text.startswith("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000\n")
    assert text.endswith("\n\n")  # a concatenating reader sees the next header on its own
    parsed = webvtt.from_string(text, strict=True)
    assert parsed.metadata == ["X-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000"]
    [cap] = parsed.captions  # the blank line is no cue
    # 15 characters: read in 1 s, the floor
    assert (cap.identifier, cap.start, cap.end) == ("3", "00:00:01.250", "00:00:02.250")
    assert cap.text == "a &lt;b&gt; &amp; --&gt; c d"
    empty = webvtt.from_string(render_segment([], 0.0), strict=True)
    assert empty.captions == []


@pytest.mark.parametrize(("offset", "header"), [
    (0.0, "MPEGTS:0,LOCAL:00:00:00.000"),
    (10.0, "MPEGTS:900000,LOCAL:00:00:00.000"),
    (1.4, "MPEGTS:126000,LOCAL:00:00:00.000"),
    (-3.5, "MPEGTS:0,LOCAL:00:00:03.500"),
    (MAX_OFFSET_S, f"MPEGTS:{int(MAX_OFFSET_S * 90000)},LOCAL:00:00:00.000"),
])
def test_the_timestamp_map_puts_the_talks_start_at_the_offset(offset: float,
                                                              header: str) -> None:
    assert timestamp_map(offset) == "X-TIMESTAMP-MAP=" + header


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), MAX_OFFSET_S + 1, -1e12])
def test_offsets_out_of_range_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="offset"):
        clean_offset(bad)


def test_the_playlist_reads_back_with_m3u8() -> None:
    text = render_playlist(T, 7, 3, False, lambda i: f"de/abc/{i}.vtt?token=t")
    live = m3u8.loads(text)
    assert live.target_duration == 2 and live.media_sequence == 7 and not live.is_endlist
    assert [s.uri for s in live.segments] == [f"de/abc/{i}.vtt?token=t" for i in (7, 8, 9)]
    assert all(s.duration == 2 for s in live.segments)
    ended = m3u8.loads(render_playlist(T, 0, 10, True, lambda i: f"{i}.vtt"))
    assert ended.is_endlist and ended.media_sequence == 0 and len(ended.segments) == 10


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


# -- cue times as published ----------------------------------------------------------------
def test_without_late_finals_segments_have_the_transcripts_times() -> None:
    lines = [line(seg, seg * 1.5, seg * 1.5 + 0.3, "x" * (5 + 7 * seg)) for seg in range(12)]
    assert T.as_published(cues_of(lines)) == cues_of(lines)


def test_a_cue_published_before_the_next_final_keeps_its_length_and_the_next_one_waits() -> None:
    text = "x" * 60  # needs 4 s
    lines = [line(0, 0.0, 0.2, text), line(1, 1.0, 9.0, "late final")]
    # the download cuts cue 0 at cue 1's first caption...
    assert [(c.start_ms, c.end_ms) for c in cues_of(lines)] == [(0, 1000), (1000, 9000)]
    # ...but segment 0 was published (at 5 s) before cue 1's final (9 s) was known
    published = T.as_published(cues_of(lines))
    assert [(c.start_ms, c.end_ms) for c in published] == [(0, 4000), (4000, 9000)]
    assert [c.segment for c in T.in_segment(published, 0)] == [0]
    assert [c.segment for c in T.in_segment(published, 3)] == [1]  # known at 9 s < 10 s


def _published_segments(lines: list[TranscriptLine], timing: HlsTiming,
                        upto: int) -> list[list]:
    """What each segment held when it was published: from the lines whose final was made
    by then, as a live talk's store held them."""
    segments = []
    for index in range(upto):
        known = [x for x in lines if x.end_s < timing.ready_at(index) - SETTLE_S]
        segments.append(timing.in_segment(timing.as_published(cues_of(known)), index))
    return segments


@pytest.mark.parametrize("seed", range(6))
def test_published_cues_never_change_never_overlap_and_are_long_enough(seed: int) -> None:
    rng = random.Random(seed)
    timing = HlsTiming(segment_s=rng.choice([1, 2, 4]), window_s=6)
    lines, clock = [], 0.0
    for seg in range(60):
        clock += rng.choice([0.0, 0.1, 0.4, 1.0, 2.5])  # bursts and pauses
        lag = rng.choice([0.0, 0.05, 0.5, 2.0, 7.0, 15.0])  # finals at once, late, very late
        lines.append(line(seg, clock, clock + lag, rng.choice(
            ["Yes.", "x" * rng.randint(10, 160), "字" * rng.randint(2, 40)])))
    final = timing.as_published(cues_of(lines))
    total = timing.ended_count(0.0, final)
    live = _published_segments(lines, timing, total)
    held: set[int] = set()
    for index in range(total):  # a segment holds the same cues live and after the talk
        assert live[index] == timing.in_segment(final, index), index
        held |= {c.segment for c in live[index]}
    assert held == set(range(60))  # every final is in a segment
    ordered = sorted(final, key=lambda c: c.start_ms)
    for cue, nxt in zip(ordered, [*ordered[1:], None], strict=True):
        assert cue.end_ms - cue.start_ms >= MIN_CUE_MS
        assert cue.end_ms >= round(cue.final_s * 1000)
        if nxt is not None:
            assert cue.end_ms <= nxt.start_ms
            assert cue.end_ms - cue.start_ms >= reading_ms(cue.text) or \
                cue.end_ms == nxt.start_ms
