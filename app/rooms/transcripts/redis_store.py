"""Transcripts on Redis: the store of a server whose rooms live on a Redis room bus, so every
replica serves every talk's transcript, whichever replica its speaker spoke to.

Keys, under the bus's prefix, all bounded (``app.rooms.transcripts.store``):

- ``{p}:talks:{room}``: the room's talks, a sorted set of talk ids by start time;
- ``{p}:talk:{room}:{talk}``: a talk's ``started_at`` and ``langs`` (a JSON list), a hash;
- ``{p}:transcript:{room}:{talk}:{lang}``: its lines, a hash segment -> JSON line, so a
  retried write of a segment replaces it instead of adding a second one.

Room names (``A-Z a-z 0-9 . _ -``), talk ids (hex) and language codes hold no ``:``, so keys
cannot collide. A line is written by one Lua script (the bound check, the write and the
talk's record happen at once). Every write renews the retention (``retention_days``) on the
keys it touches, so a talk's keys expire that long after its last line, and the room's
list hides (and, when a talk begins, drops) talks that started longer ago than that; with
no retention, transcripts are kept until a room's newer talks push them out. Run Redis
with persistence (as docker/compose.yaml does) to keep them across a Redis restart.

A Redis that cannot be reached or answers "not now" (an error reply such as OOM or READONLY)
raises ``TranscriptUnavailable``: the recorder keeps the line and retries, a download
answers 503.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis

import app.rooms.transcripts.store as bounds
from app.rooms.redis_client import ReplicaWait, guarded, unavailable
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
T = TypeVar("T")

# Record a talk, or add the languages it lacks. KEYS: the talk's hash, the room's talks.
# ARGV: talk id, started_at, languages... Returns 1 if the talk is new here.
_TOUCH = """
local function touch(talk_key, talks_key, talk_id, started_at, first_lang, last_lang)
  local created = 0
  local raw = redis.call('HGET', talk_key, 'langs')
  local langs = {}
  if raw then
    langs = cjson.decode(raw)
  else
    created = 1
    redis.call('HSET', talk_key, 'started_at', started_at)
  end
  local seen = {}
  for _, lang in ipairs(langs) do seen[lang] = true end
  local changed = created == 1
  for i = first_lang, last_lang do
    if not seen[ARGV[i]] then
      table.insert(langs, ARGV[i])
      seen[ARGV[i]] = true
      changed = true
    end
  end
  if changed then
    local encoded = '[]'
    if #langs > 0 then encoded = cjson.encode(langs) end
    redis.call('HSET', talk_key, 'langs', encoded)
  end
  redis.call('ZADD', talks_key, 'NX', started_at, talk_id)
  return created
end
"""
# Record a talk. KEYS: the talk's hash, the room's talks. ARGV: talk id, started_at,
# retention in ms (0: keep), expiry cutoff (talks started before it are dropped from the
# room's list), languages... Returns 1 if the talk is new here.
START_TALK = _TOUCH + """
local created = touch(KEYS[1], KEYS[2], ARGV[1], ARGV[2], 5, #ARGV)
if tonumber(ARGV[3]) > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return created
"""
# Keep a line unless its talk's transcript in that language is full (a segment already
# there is replaced: a retry). KEYS: lines, the talk's hash, the room's talks. ARGV: talk
# id, started_at (if the talk is new here), language, segment, line as JSON, max lines,
# retention in ms (0: keep). Returns {talk created (1/0), line kept (1/0)}.
ADD_LINE = _TOUCH + """
local created = touch(KEYS[2], KEYS[3], ARGV[1], ARGV[2], 3, 3)
if redis.call('HEXISTS', KEYS[1], ARGV[4]) == 0 and
   redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then
  return {created, 0}
end
redis.call('HSET', KEYS[1], ARGV[4], ARGV[5])
if tonumber(ARGV[7]) > 0 then
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[7]) end
end
return {created, 1}
"""


def _text(value: Any) -> str:
    """A reply as text, whether the client decodes responses (the bus's does) or not."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class RedisTranscriptStore:
    """``TranscriptStore`` on Redis. The client is usually the room bus's, which the bus
    closes; ``own_client`` makes ``close`` close it too."""

    def __init__(self, client: aioredis.Redis, prefix: str = "livetrans", *,
                 max_talks: int | None = None, max_lines: int | None = None,
                 retention_days: float | None = bounds.DEFAULT_RETENTION_DAYS,
                 own_client: bool = False, replicated: bool = False) -> None:
        self.client = client
        # a Sentinel-managed primary: a line is written until a replica has it too
        self._replicas = ReplicaWait("transcript store") if replicated else None
        self.retention_s = bounds.retention_seconds(retention_days)
        self.retention_ms = 0 if self.retention_s is None else int(self.retention_s * 1000)
        self.prefix = prefix
        self.max_talks = max_talks if max_talks is not None else bounds.MAX_TALKS_PER_ROOM
        self.max_lines = max_lines if max_lines is not None else bounds.MAX_LINES_PER_TALK
        self.own_client = own_client
        self._full = FullWarnings(log)
        self._start = client.register_script(START_TALK)
        self._add = client.register_script(ADD_LINE)

    # -- keys ----------------------------------------------------------------------------
    def _talks_key(self, room: str) -> str:
        return f"{self.prefix}:talks:{room}"

    def _talk_key(self, room: str, talk_id: str) -> str:
        return f"{self.prefix}:talk:{room}:{talk_id}"

    def _lines_key(self, room: str, talk_id: str, lang: str) -> str:
        return f"{self.prefix}:transcript:{room}:{talk_id}:{lang}"

    # -- helpers -------------------------------------------------------------------------
    async def _call(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        # error replies (OOM, READONLY, ...) are "not now" too: the line waits and is
        # written again, never skipped (``app.rooms.redis_client``)
        return await guarded(op, f"transcript store on Redis: {what}", TranscriptUnavailable)

    async def _evict(self, room: str) -> None:
        """Past ``max_talks`` talks in ``room``, the oldest go, with their lines. ZPOPMIN
        hands each old talk to one caller only, so two replicas evicting at once do not
        remove more than the excess."""
        talks_key = self._talks_key(room)
        excess = await self.client.zcard(talks_key) - self.max_talks
        if excess <= 0:
            return
        for member, _ in await self.client.zpopmin(talks_key, excess):
            talk_id = _text(member)
            talk_key = self._talk_key(room, talk_id)
            raw = await self.client.hget(talk_key, "langs")
            langs = _langs(raw)
            await self.client.delete(talk_key,
                                     *(self._lines_key(room, talk_id, lang) for lang in langs))

    async def _durably(self, op: Callable[[], Awaitable[object]]) -> None:
        if self._replicas is None:
            await op()
        else:
            await self._replicas.write(self.client, op)

    # -- TranscriptStore -----------------------------------------------------------------
    async def start_talk(self, talk: TalkRecord) -> None:
        started_at = repr(clean_epoch(talk.started_at))

        async def op() -> None:
            created = await self._start(
                keys=[self._talk_key(talk.room, talk.talk_id), self._talks_key(talk.room)],
                args=[talk.talk_id, started_at, self.retention_ms,
                      repr(bounds.expired_before(self.retention_s)) if self.retention_ms
                      else "0",
                      *clean_langs(talk.langs)])
            if int(created):
                await self._evict(talk.room)

        await self._call("start a talk", lambda: self._durably(op))

    async def add(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None:
        line = clean_line(line)
        value = json.dumps({"start": line.start_s, "end": line.end_s, "source": line.source,
                            "text": line.text})

        async def op() -> bool:
            # a line of a talk Redis does not know (a Redis restarted without persistence
            # mid-talk): kept under a talk started as long ago as the line says
            created, kept = await self._add(
                keys=[self._lines_key(room, talk_id, lang), self._talk_key(room, talk_id),
                      self._talks_key(room)],
                args=[talk_id, repr(time.time() - line.end_s), lang, str(line.segment),
                      value, self.max_lines, self.retention_ms])
            if int(created):
                await self._evict(room)
            return bool(int(kept))

        kept: list[bool] = []

        async def write() -> None:
            kept[:] = [await op()]  # idempotent: a line replaces its segment's

        await self._call("add a line", lambda: self._durably(write))
        if not kept[0]:
            self._full.refused(room, talk_id, lang, self.max_lines)

    async def talks(self, room: str) -> list[TalkRecord]:
        async def op() -> list[TalkRecord]:
            cutoff = bounds.expired_before(self.retention_s)
            members = await self.client.zrangebyscore(
                self._talks_key(room), "-inf" if cutoff == float("-inf") else repr(cutoff),
                "+inf", withscores=True)
            ids = [_text(member) for member, _ in members]
            pipe = self.client.pipeline(transaction=False)
            for talk_id in ids:
                pipe.hgetall(self._talk_key(room, talk_id))
            records = await pipe.execute() if ids else []
            # a talk whose record expired (or was evicted) is gone, whatever the list says
            return [TalkRecord(room=room, talk_id=talk_id, started_at=float(score),
                               langs=_langs(_field(record, "langs")))
                    for talk_id, (_, score), record in zip(ids, members, records, strict=True)
                    if record]

        return await self._call("list talks", op)

    async def lines(self, room: str, talk_id: str, lang: str) -> list[TranscriptLine]:
        async def op() -> list[TranscriptLine]:
            found = await self.client.hgetall(self._lines_key(room, talk_id, lang))
            out = []
            for field, raw in found.items():
                item = json.loads(_text(raw))
                out.append(TranscriptLine(segment=int(_text(field)),
                                          start_s=float(item["start"]),
                                          end_s=float(item["end"]),
                                          source=str(item["source"]), text=str(item["text"])))
            out.sort(key=lambda line: line.segment)
            return out

        return await self._call("read a transcript", op)

    async def close(self) -> None:
        if self.own_client:
            try:
                await self.client.aclose()
            except Exception as exc:
                if not unavailable(exc):
                    raise


def _field(record: dict[Any, Any], name: str) -> Any:
    """A hash field, whether the client decodes responses or not."""
    return record.get(name, record.get(name.encode()))


def _langs(raw: Any) -> tuple[str, ...]:
    """A talk's ``langs`` field as a tuple ('()' when missing or not a list)."""
    if raw is None:
        return ()
    try:
        value = json.loads(_text(raw))
    except ValueError:
        return ()
    return tuple(str(lang) for lang in value) if isinstance(value, list) else ()
