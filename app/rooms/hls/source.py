"""Where a talk's HLS subtitle rendition comes from, the same on every replica: the talk,
whether it still runs, its cues and how far its live playlist reached
(``timeline`` says what a segment holds, ``playlist`` writes it).

**The cues come from the transcript store, not from the bus's streams.** The store holds
every final of a talk with the one timing the transcript download uses (from the segment's
first caption to its final, in seconds from the talk's start), and it is on the bus's Redis
when there is one (``open_transcripts``), so every replica reads the same lines whichever
replica the speaker talks to; without a Redis bus there is one replica and its SQLite file.
The bus's finals stream carries the caption frames but not their first caption's time, is
cut to the room's latest entries (``MAXLEN``) and expires a day after the room's last one:
segments made from it would be timed differently from the transcript and could not be
served once a long talk's start had been cut. Nothing is taken from one replica's viewers'
memory (``recent``), which exists only where the room has viewers.

**Running or ended** is the room's ownership: on a Redis bus the owner key (a lease, so a
replica that died ends its talks when the lease runs out), else this replica's registry.

**The live edge.** An ended talk's playlist must reach at least as far as any of its live
playlists did (RFC 8216 lets a playlist only grow at its end), whichever replica served
them and however quiet the talk's end was. Each live playlist raises the talk's *edge* (the
end of its last published segment, in talk seconds) before it answers: in Redis next to
the transcripts (``{prefix}:hls-edge:{room}:{talk}``, kept as long as the transcripts)
with a Redis bus, in this process's memory (bounded) without one.

**Just ended.** The room is released through one outbox and the talk's last lines are
written through another, so for a segment and ``SETTLE_S`` after a talk's live playlists
stopped growing, its playlist stays the last live one; then it ends.

**Caches** (this replica's, never the truth): a talk's cues per language, reused only when
fetched after the segment asked for was published (so a cached fetch never lacks a cue the
segment must hold), and rendered segments (they never change; see ``timeline``).
Viewers asking at once share one read of the store, and players refreshing a room's
playlist at once share one read of its talks.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from app.rooms.bus import BusUnavailable, RoomBus
from app.rooms.hls.playlist import render_playlist, render_segment
from app.rooms.hls.timeline import (
    SETTLE_S,
    Cue,
    HlsTiming,
    cues_of,
    ended_range,
    live_range,
)
from app.rooms.redis_client import describe
from app.rooms.registry import RoomRegistry
from app.rooms.transcripts.store import TalkRecord, TranscriptStore, TranscriptUnavailable

if TYPE_CHECKING:
    import redis.asyncio

K = TypeVar("K")
V = TypeVar("V")

LINES_TTL_S = 2.0  # an ended talk's cues are read again after this (a late write lands)
CUES_CACHED = 16  # (talk, language) cue lists this replica keeps
SEGMENTS_CACHED = 512  # rendered segments this replica keeps
MARKS_KEPT = 4096  # talks whose live edge this process remembers (without Redis)

# Raise a talk's edge, never lower it. KEYS: the edge. ARGV: seconds, ttl ms (0: none).
_RAISE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tonumber(ARGV[1]) > current then
  if tonumber(ARGV[2]) > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[1])
  end
end
return 1
"""


class HlsUnavailable(RuntimeError):
    """The bus or the transcript store cannot be reached now; ``what`` says which."""

    def __init__(self, what: str, detail: str = "") -> None:
        super().__init__(f"{what} unavailable{': ' + detail if detail else ''}")
        self.what = what  # "room bus" or "transcript store"


@dataclass(frozen=True)
class TalkView:
    """A talk as the rendition sees it: its record and whether it still runs."""

    record: TalkRecord
    running: bool


class EdgeMarks(Protocol):
    """How far each talk's live playlists reached (talk seconds), shared by the replicas."""

    async def raise_to(self, room: str, talk_id: str, edge_s: float) -> None: ...

    async def get(self, room: str, talk_id: str) -> float: ...


def _bounded_put(cache: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)


class MemoryEdgeMarks:
    """The edges of one replica's talks (a server without a Redis bus is one replica)."""

    def __init__(self, limit: int = MARKS_KEPT) -> None:
        self.limit = limit
        self._edges: OrderedDict[tuple[str, str], float] = OrderedDict()

    async def raise_to(self, room: str, talk_id: str, edge_s: float) -> None:
        key = (room, talk_id)
        _bounded_put(self._edges, key, max(edge_s, self._edges.get(key, 0.0)), self.limit)

    async def get(self, room: str, talk_id: str) -> float:
        return self._edges.get((room, talk_id), 0.0)


class RedisEdgeMarks:
    """The edges on the bus's Redis, next to the transcripts, kept ``ttl_s`` (None:
    until deleted, as transcripts without a retention)."""

    def __init__(self, client: redis.asyncio.Redis, prefix: str = "livetrans",
                 ttl_s: float | None = None) -> None:
        self.client, self.prefix = client, prefix
        self.ttl_ms = int(ttl_s * 1000) if ttl_s else 0
        self._raise = client.register_script(_RAISE)

    def _key(self, room: str, talk_id: str) -> str:
        return f"{self.prefix}:hls-edge:{room}:{talk_id}"

    async def raise_to(self, room: str, talk_id: str, edge_s: float) -> None:
        try:
            await self._raise(keys=[self._key(room, talk_id)],
                              args=[repr(float(edge_s)), self.ttl_ms])
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise HlsUnavailable("room bus", describe(exc)) from None

    async def get(self, room: str, talk_id: str) -> float:
        try:
            value = await self.client.get(self._key(room, talk_id))
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise HlsUnavailable("room bus", describe(exc)) from None
        try:
            return float(value) if value is not None else 0.0
        except (TypeError, ValueError):
            return 0.0


class HlsSource:
    """Talks, cues and playlists of the HLS renditions on this replica."""

    def __init__(self, rooms: RoomRegistry, bus: RoomBus, store: TranscriptStore,
                 timing: HlsTiming, marks: EdgeMarks, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.rooms, self.bus, self.store = rooms, bus, store
        self.timing, self.marks, self.clock = timing, marks, clock
        self._cues: OrderedDict[tuple[str, str, str], tuple[float, list[Cue]]] = OrderedDict()
        self._loading: dict[tuple[str, str, str], asyncio.Future[None]] = {}
        self._segments: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._edges_sent: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._talks_reads: dict[str, asyncio.Future[tuple[list[TalkRecord], str | None]]] = {}

    # -- talks ---------------------------------------------------------------------------
    async def running_talk(self, room: str) -> TalkRecord | None:
        """The room's running talk (``HlsUnavailable`` when the bus cannot tell)."""
        local = self.rooms.rooms.get(room)
        if local is not None and local.speaker is not None and local.talk_id \
                and not (local.remote and self.bus.shared):
            return TalkRecord(room, local.talk_id, local.started_at, tuple(local.langs))
        if not self.bus.shared:
            return None
        try:
            owner = await self.bus.current_talk(room)
        except BusUnavailable as exc:
            raise HlsUnavailable("room bus", str(exc)) from None
        if owner is None:
            return None
        return TalkRecord(room, owner.talk_id, owner.started_at, owner.langs)

    async def talks(self, room: str) -> tuple[list[TalkRecord], str | None]:
        """The room's talks, oldest first, and the id of the running one (None: none
        runs). Every player of a room asks this at each playlist refresh: requests that
        come while a read is under way share it (one read of the bus and the store in
        flight per room, however many players), so a crowd queues on nothing."""
        read = self._talks_reads.get(room)
        if read is None:
            read = asyncio.ensure_future(self._read_talks(room))
            self._talks_reads[room] = read

            def settled(done: asyncio.Future[Any]) -> None:
                if self._talks_reads.get(room) is done:
                    del self._talks_reads[room]
                if not done.cancelled():
                    done.exception()  # retrieved here too: every asker may have left

            read.add_done_callback(settled)
        return await asyncio.shield(read)

    async def _read_talks(self, room: str) -> tuple[list[TalkRecord], str | None]:
        """One read of the room's talks. A talk just started may not be in the store yet:
        it is added from the bus."""
        running = await self.running_talk(room)
        try:
            records = list(await self.store.talks(room))
        except TranscriptUnavailable as exc:
            raise HlsUnavailable("transcript store", str(exc)) from None
        if running is not None and all(r.talk_id != running.talk_id for r in records):
            records.append(running)
        return records, running.talk_id if running is not None else None

    async def talk(self, room: str, talk_id: str) -> TalkView | None:
        """One talk of the room, or None when the room has no such talk."""
        records, running = await self.talks(room)
        for record in records:
            if record.talk_id == talk_id:
                return TalkView(record, running == talk_id)
        return None

    # -- playlists and segments ----------------------------------------------------------
    def talk_seconds(self, record: TalkRecord) -> float:
        return self.clock() - float(record.started_at)

    async def playlist(self, view: TalkView, lang: str,
                       uri: Callable[[int], str]) -> tuple[str, bool]:
        """The media playlist of ``view`` in ``lang`` (``uri(i)`` names segment ``i``), and
        whether it is the ended one (``#EXT-X-ENDLIST``)."""
        record, timing = view.record, self.timing
        now = self.talk_seconds(record)
        live = view.running
        edge = 0.0
        if not live:
            edge = await self.marks.get(record.room, record.talk_id)
            live = self._just_ended(now, edge)
        if view.running:
            published = timing.published(now)
            await self._raise_edge(record, published * timing.segment_s)
            first, count = live_range(timing, published)
        elif live:  # just ended: the live playlist as far as it reached, no further
            first, count = live_range(timing, timing.covering(edge))
        else:
            cues = await self._cues_of(record, lang, now - LINES_TTL_S)
            first, count = ended_range(timing.ended_count(edge, cues))
        return render_playlist(timing, first, count, not live, uri), not live

    def _just_ended(self, now: float, edge_s: float) -> bool:
        """Whether a talk whose live playlists reached ``edge_s`` ended so recently that its
        last finals may still be on their way to the store (its room is released by one
        outbox, its lines written by another): its players are then kept on its last live
        playlist (not growing: the edge stays) a segment and ``SETTLE_S`` longer, so the
        ended one they stop on has them."""
        timing = self.timing
        grace = timing.segment_s + SETTLE_S
        return edge_s > 0 and timing.published(now - grace) * timing.segment_s <= edge_s

    async def segment(self, view: TalkView, lang: str, index: int,
                      offset_s: float) -> str | None:
        """Segment ``index`` of ``view`` in ``lang``; None while it is not published (or
        past the end of an ended talk)."""
        record, timing = view.record, self.timing
        key = (record.room, record.talk_id, lang, index, offset_s)
        cached = self._segments.get(key)
        if cached is not None:
            self._segments.move_to_end(key)
            return cached
        now = self.talk_seconds(record)
        if view.running:
            if index >= timing.published(now):
                return None
            cues = await self._cues_of(record, lang, timing.ready_at(index))
        else:
            edge = await self.marks.get(record.room, record.talk_id)
            cues = await self._cues_of(record, lang, max(timing.ready_at(index),
                                                         now - LINES_TTL_S))
            last = (timing.covering(edge) if self._just_ended(now, edge)
                    else timing.ended_count(edge, cues))  # just ended: as listed so far
            if index >= last:
                return None
        text = render_segment(timing.in_segment(cues, index), offset_s)
        _bounded_put(self._segments, key, text, SEGMENTS_CACHED)
        return text

    async def _raise_edge(self, record: TalkRecord, edge_s: float) -> None:
        """Raise the talk's shared edge before a playlist reaching ``edge_s`` is served
        (once per new edge on this replica)."""
        key = (record.room, record.talk_id)
        if edge_s <= 0 or self._edges_sent.get(key, 0.0) >= edge_s:
            return
        await self.marks.raise_to(record.room, record.talk_id, edge_s)
        _bounded_put(self._edges_sent, key, edge_s, MARKS_KEPT)

    async def _cues_of(self, record: TalkRecord, lang: str, fetched_after_s: float) -> list[Cue]:
        """The talk's cues in ``lang``, from a read of the store begun at talk second
        ``fetched_after_s`` or later (a cached one, or a new read shared with whoever asks
        meanwhile)."""
        key = (record.room, record.talk_id, lang)
        while True:
            entry = self._cues.get(key)
            if entry is not None and entry[0] >= fetched_after_s:
                self._cues.move_to_end(key)
                return entry[1]
            loading = self._loading.get(key)
            if loading is None:
                break
            await asyncio.shield(loading)
        loading = asyncio.get_running_loop().create_future()
        self._loading[key] = loading
        try:
            began = self.talk_seconds(record)
            lines = await self.store.lines(record.room, record.talk_id, lang)
        except TranscriptUnavailable as exc:
            raise HlsUnavailable("transcript store", str(exc)) from None
        finally:
            del self._loading[key]
            loading.set_result(None)
        cues = self.timing.as_published(cues_of(lines))
        _bounded_put(self._cues, key, (began, cues), CUES_CACHED)
        return cues
