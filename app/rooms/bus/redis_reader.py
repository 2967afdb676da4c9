"""The rooms this replica's viewers follow on the Redis room bus
(``app.rooms.bus.redis_bus``): a late viewer's backlog, the one reader of every followed
room's streams (``XREAD BLOCK``, from where each room left off), what an entry means (a
talk's start, a caption, its end; anything else is skipped and counted), and the end of a
remote talk whose owner is gone. One concern: what other replicas' talks look like here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from app.rooms.bus.base import BusUnavailable, TalkInfo
from app.rooms.bus.redis_core import (
    FINALS_MAXLEN,
    MAX_DELIVERED,
    READ_BLOCK_MS,
    READ_COUNT,
    SCAN_BATCH,
    Follow,
    RedisBusCore,
    stream_id,
    talk_info,
)
from app.rooms.redis_client import describe, unavailable
from app.supervision import reraise_lost_cancel, wait_event

log = logging.getLogger("livetrans.bus")

RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)  # the reader's waits after failed reads


class Reader(RedisBusCore):
    """Following rooms: backlog, reading, applying entries, ending remote talks."""

    async def current_talk(self, room: str) -> TalkInfo | None:
        try:
            async with self._lookups:
                value = await self.client.get(self._owner(room))
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise BusUnavailable(f"room bus unavailable: {describe(exc)}") from None
        return talk_info(value)

    async def follow(self, room: str) -> None:
        """Read ``room``'s streams from now on, its running talk and that talk's finals so
        far handed to the listener first (the room's ``recent``). Returns once that is
        done, so a viewer joining right after sees each final exactly once: in ``recent``
        or in its queue. ``BusUnavailable`` when Redis cannot be read."""
        listener = self.listener
        assert listener is not None, "start() first"
        while True:
            if room in self.follows and listener.wants(room):
                return
            loading = self._loading.get(room)
            if loading is None:
                break
            await asyncio.shield(loading)
        loading = asyncio.get_running_loop().create_future()
        self._loading[room] = loading
        try:
            follow, backlog = await self._read_backlog(room)
            self._start_following(room, follow, backlog)
        finally:
            del self._loading[room]
            loading.set_result(None)

    async def _read_backlog(self, room: str) -> tuple[Follow, list[tuple[str, dict]]]:
        """Where the streams end now, and the entries of the talk that owns the room (oldest
        first, its start first) unless it has ended. The owner key says which talk runs:
        another talk's entries in the stream (an old talk's end flushed late by a replica
        that lost its lease, a rival's) neither hide it nor end it."""
        try:
            async with self._lookups:
                pipe = self.client.pipeline(transaction=False)
                pipe.xrevrange(self._partials(room), count=1)
                pipe.get(self._owner(room))
                last_partial, owner = await pipe.execute()
                current = talk_info(owner)
                last_id, entries = await self._talk_entries(room, current)
        except Exception as exc:  # noqa: BLE001 - every Redis failure is "not now"
            raise BusUnavailable(f"room bus unavailable: {describe(exc)}") from None
        follow = Follow(finals_cursor=last_id,
                        partials_cursor=last_partial[0][0] if last_partial else "0-0")
        return follow, entries

    async def _talk_entries(self, room: str, talk: TalkInfo | None,
                            ) -> tuple[str, list[tuple[str, dict]]]:
        """The id of the room's last stream entry, and ``talk``'s entries from its first
        start, oldest first; none when the talk has ended (or there is none). A start that
        is not within the bound (``MAXLEN`` trimmed it in an all-day talk, or the owner's
        start is still on its way) is made from the owner key's record of the talk, so a
        late viewer follows it all the same."""
        key = self._finals(room)
        found: list[tuple[str, dict]] = []
        upper, last_id, scanned, first_start = "+", "0-0", 0, False
        while scanned < FINALS_MAXLEN * 2 and talk is not None and not first_start:
            batch = await self.client.xrevrange(key, max=upper, min="-", count=SCAN_BATCH)
            if not batch:
                break
            if scanned == 0:
                last_id = batch[0][0]
            for entry_id, fields in batch:
                if not isinstance(fields, dict) or fields.get("talk") != talk.talk_id:
                    continue  # another talk's (an old one's late end, a rival's)
                if fields.get("k") == "end":
                    return last_id, []
                found.append((entry_id, fields))
                if fields.get("k") == "start" and not fields.get("again"):
                    first_start = True
                    break
            scanned += len(batch)
            upper = "(" + batch[-1][0]
            if len(batch) < SCAN_BATCH:
                break
        if talk is None:
            last = await self.client.xrevrange(key, count=1)
            return (last[0][0] if last else "0-0"), []
        found.reverse()
        if not any(f.get("k") == "start" for _, f in found):
            found.insert(0, ("0-0", {"k": "start", "talk": talk.talk_id, "replica": "",
                                     "info": json.dumps(talk.as_dict())}))
        return last_id, found

    def _start_following(self, room: str, follow: Follow,
                         backlog: list[tuple[str, dict]]) -> None:
        """Hand the running talk and its finals so far to the listener, then read on from
        the end of the stream (no await in between: nothing slips in or comes twice)."""
        for _entry_id, fields in backlog:
            self._apply_final(room, follow, fields, create=True)
        self.follows[room] = follow
        self._wake.set()

    async def _read_streams(self) -> None:
        """Hand the followed rooms' entries to the listener, from where each left off."""
        failures = 0
        while True:
            rooms = self._rooms_to_read()
            if not rooms:
                self._wake.clear()
                await wait_event(self._wake, 5.0)
                continue
            asked = {room: self.follows[room] for room in rooms}
            streams: dict[str, str] = {}
            for room, follow in asked.items():
                streams[self._finals(room)] = follow.finals_cursor
                streams[self._partials(room)] = follow.partials_cursor
            try:
                replies = await self._read_client.xread(streams, count=READ_COUNT,
                                                        block=READ_BLOCK_MS)
            except Exception as exc:  # noqa: BLE001 - unavailable, or a bug to restart on
                reraise_lost_cancel()  # a cancel that met the socket timeout reads as one
                if "WRONGTYPE" in str(exc)[:40]:
                    await self._set_aside_unreadable(asked)
                    continue
                if not unavailable(exc):
                    raise
                self._set_up("reads", False, describe(exc))
                await asyncio.sleep(RETRY_S[min(failures, len(RETRY_S) - 1)])
                failures += 1
                continue
            failures = 0
            self._set_up("reads", True)
            for stream, entries in replies or []:
                self._deliver(str(stream), entries, asked)

    def _rooms_to_read(self) -> list[str]:
        """Followed rooms that still have viewers here (the others are dropped) and whose
        streams can be read."""
        listener = self.listener
        for room in [r for r in self.follows if listener is None or not listener.wants(r)]:
            del self.follows[room]
        now = time.monotonic()
        return [room for room, follow in self.follows.items()
                if follow.unreadable_until <= now]

    async def _set_aside_unreadable(self, asked: dict[str, Follow]) -> None:
        """One room's key is not a stream (another client wrote it): that room is skipped
        for a while, every other room is read on. One bad key must not silence them all."""
        pipe = self._read_client.pipeline(transaction=False)
        for room in asked:
            pipe.type(self._finals(room))
            pipe.type(self._partials(room))
        kinds = await pipe.execute()
        for i, follow in enumerate(asked.values()):
            if any(k not in ("stream", "none") for k in kinds[2 * i:2 * i + 2]):
                follow.unreadable_until = time.monotonic() + 10.0
                self._skipped(TypeError("a room's stream key holds another type"))

    def _deliver(self, stream: str, entries: list, asked: dict[str, Follow]) -> None:
        finals_head, partials_head = f"{self.prefix}:finals:", f"{self.prefix}:partials:"
        partial = stream.startswith(partials_head)
        room = stream[len(partials_head if partial else finals_head):]
        follow = asked.get(room)
        if follow is None or self.follows.get(room) is not follow:
            return  # followed anew since the read began: its backlog has these
        if partial:
            newest: dict[str, dict] = {}
            for entry_id, fields in entries:
                if stream_id(entry_id) <= stream_id(follow.partials_cursor):
                    continue
                follow.partials_cursor = entry_id
                newest[str(fields.get("lang", ""))] = fields  # older ones are superseded
            for fields in newest.values():
                self._apply_partial(room, follow, fields)
            return
        for entry_id, fields in entries:
            # the reader and a lease check's catch-up may both read an entry: once
            if stream_id(entry_id) <= stream_id(follow.finals_cursor):
                continue
            follow.finals_cursor = entry_id
            self._apply_final(room, follow, fields, create=False)

    def _apply_final(self, room: str, follow: Follow, fields: Any, *, create: bool) -> None:
        """One entry of a room's finals stream. Anything another client could have written
        there is data: an entry of the wrong shape is skipped and counted."""
        listener = self.listener
        try:
            if not isinstance(fields, dict) or listener is None:
                raise TypeError("not a field map")
            kind, talk = fields.get("k"), str(fields.get("talk", ""))
            if fields.get("replica") == self.instance:
                return  # our own talk: our viewers had it already
            if kind == "start":
                info = TalkInfo.from_dict(json.loads(fields["info"]))
                if follow.talk != info.talk_id:
                    follow.talk, follow.delivered, follow.last_final = info.talk_id, set(), {}
                listener.remote_start(room, info.talk_id, info.replica, list(info.langs),
                                      info.started_at, create=create)
            elif kind == "caption":
                lang, segment = str(fields["lang"]), int(fields["segment"])
                if talk != follow.talk or (lang, segment) in follow.delivered:
                    return
                frame = str(fields["frame"])
                payload = json.loads(frame)
                if not isinstance(payload, dict):
                    raise TypeError("frame is not an object")
                if len(follow.delivered) >= MAX_DELIVERED:
                    follow.delivered.clear()
                follow.delivered.add((lang, segment))
                follow.last_final[lang] = max(segment, follow.last_final.get(lang, -1))
                listener.remote_caption(room, talk, payload, frame)
            elif kind == "end":
                listener.remote_end(room, talk)
            else:
                raise ValueError("unknown kind")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._skipped(exc)

    def _apply_partial(self, room: str, follow: Follow, fields: Any) -> None:
        listener = self.listener
        try:
            if not isinstance(fields, dict) or listener is None:
                raise TypeError("not a field map")
            if fields.get("replica") == self.instance:
                return
            talk, lang = str(fields["talk"]), str(fields["lang"])
            segment = int(fields["segment"])
            if talk != follow.talk or segment <= follow.last_final.get(lang, -1):
                return  # an old talk's, or its segment's final is out already
            frame = str(fields["frame"])
            payload = json.loads(frame)
            if not isinstance(payload, dict) or payload.get("final"):
                raise TypeError("frame is not a partial caption")
            listener.remote_caption(room, talk, payload, frame)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self._skipped(exc)

    def _skipped(self, exc: Exception) -> None:
        self.skipped += 1
        if self._on_skipped is not None:
            self._on_skipped()
        if self.skipped == 1 or self.skipped % 1000 == 0:
            log.warning("room bus: %d foreign or malformed entries skipped (latest: %s)",
                        self.skipped, type(exc).__name__)

    async def _check_remote(self) -> None:
        """A remote talk is over when its room is another talk's, or has had no owner for
        a whole lease (a dead replica); a moment without one (Redis restarted and the
        owner has not taken it back yet) is not the end. Before a talk is ended here, what
        its stream holds is handed on (``_catch_up``): its last finals come before
        ``ended``, however far behind the reader is."""
        listener = self.listener
        if listener is None:
            return
        now, followed = time.monotonic(), set()
        for room, talk_id in listener.remote_rooms():
            followed.add((room, talk_id))
            current = await self.current_talk(room)
            if current is not None and current.talk_id == talk_id:
                self._missing.pop((room, talk_id), None)
                continue
            since = self._missing.setdefault((room, talk_id), now)
            if current is not None or now - since >= self.lease_ms / 1000:
                await self._catch_up(room)
                log.info("room bus: a talk on another replica is over (its room is another "
                         "talk's or its lease ran out)")
                self._missing.pop((room, talk_id), None)
                listener.remote_end(room, talk_id)
        for key in [k for k in self._missing if k not in followed]:
            del self._missing[key]

    async def _catch_up(self, room: str) -> None:
        """Hand on every entry of ``room``'s finals stream past where this replica is (the
        reader may be a read behind): each is handed on once (``_deliver`` skips what is
        behind a follow's cursor), whoever reads it first."""
        follow = self.follows.get(room)
        key = self._finals(room)
        while follow is not None and self.follows.get(room) is follow:
            async with self._lookups:
                entries = await self.client.xrange(key, min=f"({follow.finals_cursor}",
                                                   max="+", count=READ_COUNT)
            if not entries:
                return
            self._deliver(key, entries, {room: follow})
            if len(entries) < READ_COUNT:
                return
