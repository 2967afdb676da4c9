"""Where a room voice's segments live between the replica that speaks and the replicas
that serve listeners: ``VoiceSegments``.

Written once by the talk's replica (``track.RoomVoiceTrack``), read by any replica's HLS
routes (``app.rooms.voice.route``). A segment never changes once written, so a reader caches
freely. Two homes, as the room bus has: this process (``MemoryVoiceSegments``, one
replica) and Redis (``redis_segments.RedisVoiceSegments``, every replica of a room bus).
Both are bounded: per talk and language at most ``MAX_TRACK_BYTES`` (the oldest segments
go first: a live player wants the newest), and in all at most ``MAX_TOTAL_BYTES`` here (the
oldest talks go first) or the transcript retention in Redis.

Each store carries its live feed (``live``: ``live_feed``), the same voice in short pieces
for listeners who want it within a second, on the same home.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

from app.rooms.voice.live_feed import MemoryVoiceLive, VoiceLive
from app.rooms.voice.track import VoiceSegment

MAX_TRACK_BYTES = 64 * 1024 * 1024  # about 4 hours of one language's voice at 32 kbit/s
MAX_TOTAL_BYTES = 512 * 1024 * 1024  # this process's segments, every talk
_HEADER = struct.Struct("<dd")  # first_s, duration_s


def pack(segment: VoiceSegment) -> bytes:
    """A segment as bytes (its times, then its audio): how Redis keeps it."""
    return _HEADER.pack(segment.first_s, segment.duration_s) + segment.audio


def unpack(index: int, data: bytes) -> VoiceSegment:
    first_s, duration_s = _HEADER.unpack_from(data)
    return VoiceSegment(index, data[_HEADER.size:], first_s, duration_s)


@dataclass(frozen=True)
class TrackIndex:
    """What a playlist needs of a track: its segments' indices and lengths, in order
    (the oldest may have been dropped for the bound), and whether it ended."""

    durations: dict[int, float]
    ended: bool


class VoiceSegments(Protocol):
    live: VoiceLive

    async def put(self, room: str, talk: str, lang: str, segment: VoiceSegment) -> None: ...

    async def end(self, room: str, talk: str, lang: str, count: int) -> None: ...

    async def index(self, room: str, talk: str, lang: str) -> TrackIndex | None:
        ...  # None: no voice in this language for this talk

    async def get(self, room: str, talk: str, lang: str, index: int) -> VoiceSegment | None:
        ...


@dataclass
class _Track:
    segments: OrderedDict[int, VoiceSegment] = field(default_factory=OrderedDict)
    bytes: int = 0
    ended: bool = False


class MemoryVoiceSegments:
    """This process's voices (a server without a room bus)."""

    def __init__(self, max_track_bytes: int = MAX_TRACK_BYTES,
                 max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.max_track_bytes = max_track_bytes
        self.max_total_bytes = max_total_bytes
        self.tracks: OrderedDict[tuple[str, str, str], _Track] = OrderedDict()
        self.total = 0
        self.live = MemoryVoiceLive()

    def _track(self, key: tuple[str, str, str]) -> _Track:
        track = self.tracks.get(key)
        if track is None:
            track = self.tracks[key] = _Track()
        return track

    async def put(self, room: str, talk: str, lang: str, segment: VoiceSegment) -> None:
        key = (room, talk, lang)
        track = self._track(key)
        size = len(segment.audio)
        track.segments[segment.index] = segment
        track.bytes += size
        self.total += size
        while track.bytes > self.max_track_bytes and len(track.segments) > 1:
            self._drop(track, next(iter(track.segments)))
        while self.total > self.max_total_bytes and len(self.tracks) > 1:
            oldest_key = next(iter(self.tracks))
            if oldest_key == key:
                break
            old = self.tracks.pop(oldest_key)
            self.total -= old.bytes

    def _drop(self, track: _Track, index: int) -> None:
        gone = track.segments.pop(index)
        track.bytes -= len(gone.audio)
        self.total -= len(gone.audio)

    async def end(self, room: str, talk: str, lang: str, count: int) -> None:
        self._track((room, talk, lang)).ended = True

    async def index(self, room: str, talk: str, lang: str) -> TrackIndex | None:
        track = self.tracks.get((room, talk, lang))
        if track is None:
            return None
        return TrackIndex({i: s.duration_s for i, s in track.segments.items()}, track.ended)

    async def get(self, room: str, talk: str, lang: str, index: int) -> VoiceSegment | None:
        track = self.tracks.get((room, talk, lang))
        return None if track is None else track.segments.get(index)
