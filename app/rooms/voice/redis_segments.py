"""Room voice segments on Redis: every replica of a room bus serves every talk's voice,
whichever replica its speaker spoke to (``segments`` has the contract).

Keys, under the bus's prefix, per talk and language (room names, talk ids and language
codes hold no ``:``, so keys cannot collide):

- ``{p}:voice:{room}:{talk}:{lang}``: the index, a hash: segment -> its duration, and
  ``first`` (the oldest segment kept), ``bytes`` (the audio kept), ``ended`` (the count,
  once the track ended); a playlist reads only this;
- ``{p}:voice:{room}:{talk}:{lang}:audio``: the segments, a hash: segment -> its times and
  ADTS audio (``segments.pack``).

One Lua script writes a segment, its index entry and the bound at once: past
``MAX_TRACK_BYTES`` the oldest segments go. Every write renews the keys' expiry (the
transcript retention), so a talk's voice goes that long after its last segment. A Redis
that cannot be reached or answers "not now" raises ``VoiceStoreUnavailable`` (the track
logs the segment as lost; a player's request gets 503 and retries).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis

from app.rooms.redis_client import guarded
from app.rooms.voice.redis_live import RedisVoiceLive
from app.rooms.voice.segments import MAX_TRACK_BYTES, TrackIndex, pack, unpack
from app.rooms.voice.track import VoiceSegment

T = TypeVar("T")

# KEYS: the index, the audio. ARGV: segment, packed, duration, max bytes, expiry ms.
_PUT = """
local index, audio = KEYS[1], KEYS[2]
local at = tonumber(ARGV[1])
redis.call('HSET', audio, ARGV[1], ARGV[2])
redis.call('HSET', index, ARGV[1], ARGV[3])
redis.call('HSETNX', index, 'first', ARGV[1])
local total = redis.call('HINCRBY', index, 'bytes', string.len(ARGV[2]))
local first = tonumber(redis.call('HGET', index, 'first'))
while total > tonumber(ARGV[4]) and first < at do
  local gone = tostring(first)
  total = redis.call('HINCRBY', index, 'bytes', -redis.call('HSTRLEN', audio, gone))
  redis.call('HDEL', audio, gone)
  redis.call('HDEL', index, gone)
  first = first + 1
end
redis.call('HSET', index, 'first', first)
if tonumber(ARGV[5]) > 0 then
  redis.call('PEXPIRE', index, ARGV[5])
  redis.call('PEXPIRE', audio, ARGV[5])
end
return total
"""


class VoiceStoreUnavailable(RuntimeError):
    """Redis cannot take or give a voice segment now."""


class RedisVoiceSegments:
    def __init__(self, client: aioredis.Redis, prefix: str = "livetrans",
                 retention_s: float | None = None,
                 max_track_bytes: int = MAX_TRACK_BYTES) -> None:
        self.client = client
        self.prefix = prefix
        self.expiry_ms = 0 if retention_s is None else int(retention_s * 1000)
        self.max_track_bytes = max_track_bytes
        self._put = client.register_script(_PUT)
        self.live = RedisVoiceLive(client, prefix)

    def _key(self, room: str, talk: str, lang: str) -> str:
        return f"{self.prefix}:voice:{room}:{talk}:{lang}"

    async def _call(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        return await guarded(op, f"room voice on Redis: {what}", VoiceStoreUnavailable)

    async def put(self, room: str, talk: str, lang: str, segment: VoiceSegment) -> None:
        key = self._key(room, talk, lang)
        await self._call("write", lambda: self._put(
            keys=[key, key + ":audio"],
            args=[segment.index, pack(segment), f"{segment.duration_s:.6f}",
                  self.max_track_bytes, self.expiry_ms]))

    async def end(self, room: str, talk: str, lang: str, count: int) -> None:
        key = self._key(room, talk, lang)
        await self._call("end", lambda: self.client.hset(key, "ended", count))

    async def index(self, room: str, talk: str, lang: str) -> TrackIndex | None:
        raw: dict[Any, Any] = await self._call(
            "read", lambda: self.client.hgetall(self._key(room, talk, lang)))
        if not raw:
            return None
        fields = {_text(k): _text(v) for k, v in raw.items()}
        first = int(fields.get("first", "0"))
        durations = {int(k): float(v) for k, v in fields.items()
                     if k.isdigit() and int(k) >= first}
        return TrackIndex(dict(sorted(durations.items())), "ended" in fields)

    async def get(self, room: str, talk: str, lang: str, index: int) -> VoiceSegment | None:
        key = self._key(room, talk, lang) + ":audio"
        data = await self._call("read", lambda: self.client.hget(key, str(index)))
        return None if data is None else unpack(index, bytes(data))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
