"""One language's voice of one talk, laid on the talk's clock and cut into HLS segments.

The replica that holds the talk speaks it (the speaker's connection's voices,
``app.live.voices``); each chunk of speech is placed on the talk's clock where it would
be heard: at the moment it arrives, or right after the speech before it when the voice is
still talking (``end_s``), never overlapping. Segment ``i`` covers talk seconds
``[i*D, (i+1)*D)``, as the subtitle segments do (``serve --hls-segment-s``): it is cut,
encoded (one AAC stream for the whole talk, ``aac.AacStream``) and published once the
clock has passed its end plus ``SETTLE_S``. Speech always lands after the present moment
and so after every published segment: a published segment never changes. Silence fills
the time nobody speaks, so a player's timeline runs with the talk's.

Memory is bounded: what is not yet cut is the speech queued ahead of the clock, at most
``MAX_AHEAD_S`` (more is dropped and counted: the voice stream's own bounds normally keep
it far below); what was cut is the store's (``segments``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from app.rooms.voice.aac import RATE, AacFrame, AacStream
from app.speech.resample import Resampler

log = logging.getLogger("livetrans.rooms")

SETTLE_S = 0.25  # a segment is cut this long after its window ends
MAX_AHEAD_S = 120.0  # speech queued ahead of the talk's clock, at most


@dataclass(frozen=True)
class VoiceSegment:
    """One published segment: ADTS frames, the talk second of the first frame (its ID3
    timestamp, before the player's offset) and its length."""

    index: int
    audio: bytes
    first_s: float
    duration_s: float


Publish = Callable[[VoiceSegment], Awaitable[None]]


class RoomVoiceTrack:
    """Speech in, segments out (to ``publish``), on the talk's clock ``clock()``
    (seconds since the talk started)."""

    def __init__(self, segment_s: float, publish: Publish, clock: Callable[[], float],
                 on_end: Callable[[int], Awaitable[None]] | None = None) -> None:
        self.segment_s = segment_s
        self.publish = publish
        self.on_end = on_end  # told the number of segments when the track ends
        self.clock = clock
        self.encoder = AacStream()
        self.pending = np.zeros(0, dtype=np.int16)  # PCM from ``cut_s`` on
        self.cut_s = 0.0  # the talk second up to which segments were cut
        self.end_s = 0.0  # where the next speech may start: after the speech before it
        self.index = 0  # the next segment
        self.dropped_s = 0.0  # speech beyond ``MAX_AHEAD_S``
        self.spoken_s = 0.0
        self._resamplers: dict[int, Resampler] = {}
        self._frames: list[AacFrame] = []  # encoded, not yet in a segment
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()  # one cut at a time
        self._stop = asyncio.Event()  # the ticker's end (never cancelled inside a cut)
        self.failed = 0  # segments the store did not take (logged)
        self.ended = False

    # -- in ------------------------------------------------------------------------------
    def add(self, pcm: bytes, rate: int) -> None:
        """A chunk of speech (PCM16 mono at ``rate``), heard from now or after the speech
        before it."""
        if self.ended or not pcm:
            return
        samples = np.frombuffer(pcm[: len(pcm) - len(pcm) % 2], dtype="<i2")
        if rate != RATE:
            resampler = self._resamplers.setdefault(rate, Resampler(rate, RATE))
            samples = np.clip(np.round(resampler.process(samples.astype(np.float64))),
                              -32768, 32767).astype(np.int16)
        start = max(self.clock(), self.end_s, self.cut_s)
        seconds = len(samples) / RATE
        if start + seconds - self.clock() > MAX_AHEAD_S:
            self.dropped_s += seconds
            return
        at = round((start - self.cut_s) * RATE)
        if len(self.pending) < at + len(samples):
            self.pending = np.concatenate(
                [self.pending, np.zeros(at + len(samples) - len(self.pending), np.int16)])
        self.pending[at:at + len(samples)] = samples
        self.end_s = start + seconds
        self.spoken_s += seconds

    # -- out -----------------------------------------------------------------------------
    def start(self) -> None:
        """Cut segments as the clock passes them, until ``finish``."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while not self._stop.is_set():
            due = (self.index + 1) * self.segment_s + SETTLE_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), max(0.0, due - self.clock()))
            if not self._stop.is_set() and self.clock() >= due - SETTLE_S:
                await self.cut()

    async def cut(self, last: bool = False) -> VoiceSegment:
        """Encode and publish the next segment (``last``: the track's end, which may be
        shorter and carries what the encoder held back)."""
        async with self._lock:
            length = self.segment_s
            if last:  # up to the end of the speech, in whole AAC frames, at least one
                length = max(min(self.segment_s, self.end_s - self.cut_s), 1024 / RATE)
            count = round(length * RATE)
            window = self.pending[:count]
            if len(window) < count:
                window = np.concatenate([window, np.zeros(count - len(window), np.int16)])
            self.pending = self.pending[count:]
            self._frames += self.encoder.encode(window.astype("<i2").tobytes())
            if last:
                self._frames += self.encoder.flush()
            frames, self._frames = self._frames, []
            segment = VoiceSegment(self.index, b"".join(f.data for f in frames),
                                   frames[0].pts_s if frames else self.cut_s, length)
            self.index += 1
            self.cut_s += length
            try:
                await self.publish(segment)
            except Exception as exc:  # noqa: BLE001 - the store's trouble, not the talk's
                self.failed += 1
                log.warning("room voice: segment %d not stored (%s)", segment.index,
                            type(exc).__name__)
            return segment

    async def finish(self) -> None:
        """The talk ended: the speech still queued is cut into the last segments, then
        the track says how many there are. Idempotent."""
        if self.ended:
            return
        self.ended = True
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task})
        while self.end_s - self.cut_s > self.segment_s:
            await self.cut()
        await self.cut(last=True)
        if self.on_end is not None:
            await self.on_end(self.index)

    def abort(self) -> None:
        """Stop without cutting more (the server shuts down past its grace)."""
        self.ended = True
        self._stop.set()
