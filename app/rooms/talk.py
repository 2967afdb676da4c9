"""A speaker's talk in a room, its whole life: claimed, captioned, transcribed, released.

``Talk.open`` claims the room on the room bus, then in this replica's registry, and starts
the talk's transcript; ``publish`` hands one caption (encoded once) to the room's viewers
here, to the bus for the other replicas and, for a final, to the transcript; ``end`` and
``finish`` release the room. The live connection's publisher (``app.live.publisher``) only
sends frames to the speaker and hands captions here, so a room bus shared between
replicas plugs in here, not in the translator or the socket's reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

from app.rooms.bus import RoomBus, TalkInfo
from app.rooms.registry import Room, RoomRegistry, RoomTakenError, new_talk_id
from app.rooms.transcripts.recorder import TranscriptRecorder
from app.rooms.transcripts.store import TalkRecord, TranscriptLine

MAX_OPEN_SEGMENTS = 4096  # segments whose first caption time waits for their finals
RELEASE_WAIT_S = 2.0  # how long ``finish`` waits for the room's release and transcript


class FinalSink(Protocol):
    """Something a talk hands each final caption to besides its transcript (the pushes of
    ``app.live.outputs``), and closes when the talk ends. ``final`` runs on the caption
    path: it must return at once and never raise."""

    def final(self, info: TalkInfo, lang: str, line: TranscriptLine) -> None: ...

    def close(self) -> None: ...


class Talk:
    """One speaker's talk; nothing is held until ``open``, and nothing after ``end``."""

    def __init__(self, rooms: RoomRegistry, owner: object, bus: RoomBus | None = None,
                 recorder: TranscriptRecorder | None = None,
                 replica: str = "livetrans") -> None:
        self.rooms = rooms
        self.owner = owner  # the speaker, as the room registry knows it
        self.bus, self.recorder, self.replica = bus, recorder, replica
        self.room: Room | None = None
        self.info: TalkInfo | None = None
        # told when the bus finds the room owned by another replica (``open`` sets it on
        # the room): the speaker's publisher says so to the speaker
        self.on_lost: Callable[[], None] | None = None
        self._t0 = 0.0  # the talk's start (monotonic): transcript times count from it
        self._first: dict[int, float] = {}  # segment -> its first caption (monotonic)
        self._finals: dict[int, int] = {}  # segment -> finals published (one per language)
        self.sinks: list[FinalSink] = []  # pushes; closed by ``end``

    async def open(self, name: str, langs: list[str]) -> Room:
        """Claim the room on the bus, then here (``RoomTakenError``, ``RoomTakenOnBus``,
        ``BusUnavailable``: then nothing is held) and start its transcript. The bus goes
        first: a speaker who loses the race for the room on another replica never touched
        this replica's room, so viewers waiting here for the winner's talk keep waiting."""
        existing = self.rooms.rooms.get(name)
        if existing is not None and existing.speaker is not None and not existing.remote:
            raise RoomTakenError(f"room '{name}' already has a speaker")
        info = TalkInfo(room=name, talk_id=new_talk_id(), replica=self.replica,
                        langs=tuple(langs), started_at=time.time())
        if self.bus is not None:
            await self.bus.claim(info)
        try:
            room = self.rooms.claim(name, self.owner, langs, talk_id=info.talk_id,
                                    started_at=info.started_at,
                                    displace_remote=self.bus is not None and self.bus.shared)
        except RoomTakenError:
            if self.bus is not None:
                self.bus.release(info)
            raise
        room.on_lost = self._lost
        self.room, self.info, self._t0 = room, info, time.monotonic()
        if self.recorder is not None:
            self.recorder.start_talk(TalkRecord(room=name, talk_id=info.talk_id,
                                                started_at=info.started_at,
                                                langs=tuple(langs)))
        return room

    def clock(self) -> float:
        """Seconds since the talk started (its transcript's and its HLS renditions'
        clock)."""
        return time.monotonic() - self._t0

    def _lost(self) -> None:
        if self.on_lost is not None:
            self.on_lost()

    def publish(self, payload: dict[str, Any], text: str) -> None:
        """One caption frame (``text`` is ``payload`` encoded) to the room's viewers of its
        language here (never waiting for one), to the bus, and, a final, to the transcript
        and the talk's sinks (pushes). Nothing while no room is open."""
        if self.room is None:
            return
        self.room.publish(payload["lang"], payload, text, payload["final"])
        if self.info is not None:
            if self.bus is not None:
                self.bus.caption(self.info, payload, text)
            self._transcribe(payload)

    def _transcribe(self, payload: dict[str, Any]) -> None:
        """A final caption becomes a transcript line: from its segment's first caption
        (any language) to now, in seconds from the talk's start."""
        segment, now = payload.get("segment"), time.monotonic()
        if not isinstance(segment, int):
            return
        if segment not in self._first and len(self._first) < MAX_OPEN_SEGMENTS:
            self._first[segment] = now
        if not payload.get("final") or self.info is None:
            return
        if self.recorder is None and not self.sinks:
            return
        start = self._first.get(segment, now)
        line = TranscriptLine(segment=segment, start_s=round(start - self._t0, 3),
                              end_s=round(now - self._t0, 3),
                              source=str(payload.get("source", "")),
                              text=str(payload.get("text", "")))
        if self.recorder is not None:
            self.recorder.line(self.info.room, self.info.talk_id, str(payload["lang"]), line)
        for sink in self.sinks:
            sink.final(self.info, str(payload["lang"]), line)
        self._finals[segment] = self._finals.get(segment, 0) + 1
        if self._finals[segment] >= len(self.info.langs):  # every language has its final
            self._first.pop(segment, None)
            self._finals.pop(segment, None)

    def end(self) -> asyncio.Future[None] | None:
        """The talk is over (the speaker stopped or left): viewers get ``ended``. Returns
        the bus's release when it lands later (``finish`` waits for it). Its sinks close
        (pushes flush in the background, within their own bound)."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            sink.close()
        if self.room is not None:
            self.rooms.release(self.room, self.owner)
            self.room = None
        released = None
        if self.info is not None:
            if self.bus is not None:
                released = self.bus.release(self.info)
            self.info = None
        return released

    async def finish(self, wait_s: float = RELEASE_WAIT_S) -> None:
        """End the talk and wait (at most ``wait_s``) until the bus has the room free and
        the talk's transcript is written, so a speaker who heard ``done`` can hand the room
        to one on another replica at once and download the whole transcript. A store
        away: its writes wait in their outbox and land when it returns (the room is free
        then, or when the lease runs out)."""
        recorder = self.recorder if self.info is not None else None
        pending = [self.end()]
        if recorder is not None:
            pending.append(recorder.written())
        waits = [asyncio.shield(f) for f in pending if f is not None]
        if waits:
            with contextlib.suppress(TimeoutError):  # bounded and one-shot: no lost-cancel
                async with asyncio.timeout(wait_s):  # check, which could cut a cleanup short
                    await asyncio.gather(*waits)
