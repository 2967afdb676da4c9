"""Where a live connection's frames leave: the speaker's own socket, and the room's viewers.

Every frame goes through ``send_text`` under one lock (the reader's error frames and the
translator's captions interleave whole). A caption is encoded once and the same text is
sent to the speaker and published to the room (``app.rooms.registry``), which never waits for a
viewer. This is the one place captions leave a connection, so a room bus shared between
replicas plugs in here (``publish``), not in the translator or the reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from fastapi import WebSocket

from app.live.frames import encode_frame
from app.rooms.bus import RoomBus, TalkInfo
from app.rooms.registry import Room, RoomRegistry, RoomTakenError, new_talk_id
from app.rooms.transcripts.recorder import TranscriptRecorder
from app.rooms.transcripts.store import TalkRecord, TranscriptLine

MAX_OPEN_SEGMENTS = 4096  # segments whose first caption time waits for their finals
RELEASE_WAIT_S = 2.0  # how long ``done`` waits for the room's release and transcript


class ConnectionGone(Exception):
    """The client is gone (or the socket already closed): nothing more can be sent."""


class CaptionPublisher:
    def __init__(self, ws: WebSocket, rooms: RoomRegistry, owner: object,
                 bus: RoomBus | None = None, recorder: TranscriptRecorder | None = None,
                 replica: str = "livetrans") -> None:
        self.ws = ws
        self.rooms = rooms
        self.owner = owner  # the speaker, as the room registry knows it
        self.bus, self.recorder, self.replica = bus, recorder, replica
        self.room: Room | None = None
        self.talk: TalkInfo | None = None
        self.send_lock = asyncio.Lock()
        self._t0 = 0.0  # the talk's start (monotonic): transcript times count from it
        self._first: dict[int, float] = {}  # segment -> its first caption (monotonic)
        self._finals: dict[int, int] = {}  # segment -> finals published (one per language)
        self._tasks: set[asyncio.Task] = set()  # frames sent from outside a reader's turn

    async def open_room(self, name: str, langs: list[str]) -> Room:
        """Claim the room on the bus, then here (``RoomTakenError``, ``RoomTakenOnBus``,
        ``BusUnavailable``: then nothing is held) and start its transcript. The bus goes
        first: a speaker who loses the race for the room on another replica never touched
        this replica's room, so viewers waiting here for the winner's talk keep waiting."""
        existing = self.rooms.rooms.get(name)
        if existing is not None and existing.speaker is not None and not existing.remote:
            raise RoomTakenError(f"room '{name}' already has a speaker")
        talk = TalkInfo(room=name, talk_id=new_talk_id(), replica=self.replica,
                        langs=tuple(langs), started_at=time.time())
        if self.bus is not None:
            await self.bus.claim(talk)
        try:
            room = self.rooms.claim(name, self.owner, langs, talk_id=talk.talk_id,
                                    started_at=talk.started_at,
                                    displace_remote=self.bus is not None and self.bus.shared)
        except RoomTakenError:
            if self.bus is not None:
                self.bus.release(talk)
            raise
        room.on_lost = self._room_lost
        self.room, self.talk, self._t0 = room, talk, time.monotonic()
        if self.recorder is not None:
            self.recorder.start_talk(TalkRecord(room=name, talk_id=talk.talk_id,
                                                started_at=talk.started_at,
                                                langs=tuple(langs)))
        return room

    def _room_lost(self) -> None:
        """The bus found this talk's room owned by another replica (Redis was away longer
        than the lease and a rival took it): the speaker hears it, not only the log."""
        async def tell() -> None:
            with contextlib.suppress(ConnectionGone):
                await self.error("room_lost", "this talk lost its room on the room bus (it "
                                 "was away longer than the lease and another speaker took "
                                 "the room); captions now reach this replica's viewers only")

        task = asyncio.get_running_loop().create_task(tell())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send(self, payload: dict[str, Any]) -> None:
        """Send one frame; it always encodes, and a closed socket raises ``ConnectionGone``."""
        await self.send_text(encode_frame(payload))

    async def send_text(self, text: str) -> None:
        """Send one encoded frame (``encode_frame``); a closed socket: ``ConnectionGone``."""
        async with self.send_lock:
            try:
                await self.ws.send_text(text)
            except Exception as exc:  # noqa: BLE001 - every send failure means the same
                raise ConnectionGone(type(exc).__name__) from exc

    async def error(self, code: str, message: str, *, segment: int | None = None,
                    final: bool = False, param: str | None = None,
                    lang: str | None = None) -> None:
        """An ``error`` frame; one about a segment names it and whether it answers a final,
        and, when one target language failed, which one."""
        payload: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if segment is not None:
            payload["segment"] = segment
            payload["final"] = final
        if lang is not None:
            payload["lang"] = lang
        if param is not None:
            payload["param"] = param
        await self.send(payload)

    async def caption(self, payload: dict[str, Any]) -> None:
        """A caption frame: to the room's viewers of its language (never waiting for one),
        then to the speaker."""
        text = encode_frame(payload)
        if self.room is not None:
            self.room.publish(payload["lang"], payload, text, payload["final"])
            if self.talk is not None:
                if self.bus is not None:
                    self.bus.caption(self.talk, payload, text)
                self._transcribe(payload)
        await self.send_text(text)

    def _transcribe(self, payload: dict[str, Any]) -> None:
        """A final caption becomes a transcript line: from its segment's first caption
        (any language) to now, in seconds from the talk's start."""
        segment, now = payload.get("segment"), time.monotonic()
        if not isinstance(segment, int):
            return
        if segment not in self._first and len(self._first) < MAX_OPEN_SEGMENTS:
            self._first[segment] = now
        if not payload.get("final") or self.recorder is None or self.talk is None:
            return
        start = self._first.get(segment, now)
        self.recorder.line(self.talk.room, self.talk.talk_id, str(payload["lang"]),
                           TranscriptLine(segment=segment, start_s=round(start - self._t0, 3),
                                          end_s=round(now - self._t0, 3),
                                          source=str(payload.get("source", "")),
                                          text=str(payload.get("text", ""))))
        self._finals[segment] = self._finals.get(segment, 0) + 1
        if self._finals[segment] >= len(self.talk.langs):  # every language has its final
            self._first.pop(segment, None)
            self._finals.pop(segment, None)

    def end_room(self) -> asyncio.Future[None] | None:
        """The talk is over (the speaker stopped or left): viewers get ``ended``. Returns
        the bus's release when it lands later (``finish_room`` waits for it)."""
        if self.room is not None:
            self.rooms.release(self.room, self.owner)
            self.room = None
        released = None
        if self.talk is not None:
            if self.bus is not None:
                released = self.bus.release(self.talk)
            self.talk = None
        return released

    async def finish_room(self, wait_s: float = RELEASE_WAIT_S) -> None:
        """End the talk and wait (at most ``wait_s``) until the bus has the room free and
        the talk's transcript is written, so a speaker who heard ``done`` can hand the room
        to one on another replica at once and download the whole transcript. A store
        away: its writes wait in their outbox and land when it returns (the room is free
        then, or when the lease runs out)."""
        recorder = self.recorder if self.talk is not None else None
        pending = [self.end_room()]
        if recorder is not None:
            pending.append(recorder.written())
        waits = [asyncio.shield(f) for f in pending if f is not None]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), wait_s)
