"""One language's voice of one talk, laid on the talk's clock: HLS segments for players
and short live pieces for listeners who want it now.

The replica that holds the talk speaks it (the speaker's connection's voices,
``app.live.voices``); each chunk of speech is placed on the talk's clock where it would
be heard: at the moment it arrives, or right after the speech before it when the voice is
still talking (``end_s``), never overlapping. Silence fills the time nobody speaks, so a
player's timeline runs with the talk's.

The clock's time is encoded as it passes, in pieces of ``PIECE_S`` (one AAC stream for the
whole talk, ``aac.AacStream``), each once the clock is ``PIECE_SETTLE_S`` past its end:
speech always lands after the present moment, so what was encoded never changes. A piece
goes at once to ``on_piece`` (the low-latency listeners' feed, ``live``); segment ``i``,
which covers talk seconds ``[i*D, (i+1)*D)`` as the subtitle segments do
(``serve --hls-segment-s``), is the frames of its pieces, published when its last piece is.
Segments and pieces are the same frames, so an HLS player and a live listener hear the
same audio.

A segment the store cannot take (Redis away) waits, and is written before the next one
once the store is back (``_store``): listeners on other replicas miss nothing a short
outage covers. Memory is bounded: what is not yet encoded is the speech queued ahead of
the clock, at most ``MAX_AHEAD_S`` (more is dropped and counted: the voice stream's own
bounds normally keep it far below); what was cut is the store's (``segments``). The
ticker's task ends only by ``finish`` or ``abort``; an unexpected failure in it is logged
and ends the track (``failed_task``), never silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from app.rooms.voice.aac import RATE, AacFrame, AacStream
from app.speech.resample import Resampler

log = logging.getLogger("livetrans.rooms")

PIECE_S = 0.25  # a live piece: what a listener waits for at least, besides the network
PIECE_SETTLE_S = 0.05  # a piece is encoded this long after its window ends
MAX_AHEAD_S = 120.0  # speech queued ahead of the talk's clock, at most
MAX_UNSTORED_S = 600.0  # segments waiting for a store that is away, at most this much audio
END_RETRIES, END_RETRY_S = 3, 1.0  # the talk's end: so many more tries to store the rest
_PIECE = round(PIECE_S * RATE)


@dataclass(frozen=True)
class VoiceSegment:
    """One published segment: ADTS frames, the talk second of the first frame (its ID3
    timestamp, before the player's offset) and its length."""

    index: int
    audio: bytes
    first_s: float
    duration_s: float


@dataclass(frozen=True)
class VoicePiece:
    """A few AAC frames for live listeners: ADTS frames and the talk second of the first
    (``last``: the track's end; its audio may be empty)."""

    audio: bytes
    first_s: float
    last: bool = False


Publish = Callable[[VoiceSegment], Awaitable[None]]
PublishPiece = Callable[[VoicePiece], Awaitable[None]]


class RoomVoiceTrack:
    """Speech in, segments out (to ``publish``) and pieces out (to ``on_piece``), on the
    talk's clock ``clock()`` (seconds since the talk started)."""

    def __init__(self, segment_s: float, publish: Publish, clock: Callable[[], float],
                 on_end: Callable[[int], Awaitable[None]] | None = None,
                 on_piece: PublishPiece | None = None) -> None:
        self.segment_s = segment_s
        self.publish = publish
        self.on_end = on_end  # told the number of segments when the track ends
        self.on_piece = on_piece
        self.clock = clock
        self.encoder = AacStream()
        self.pending = np.zeros(0, dtype=np.int16)  # PCM from ``encoded_s`` on
        self._encoded = 0  # samples of the talk encoded so far
        self._cut = 0  # samples of the talk in published segments
        self.end_s = 0.0  # where the next speech may start: after the speech before it
        self.index = 0  # the next segment
        self.dropped_s = 0.0  # speech beyond ``MAX_AHEAD_S``
        self.spoken_s = 0.0
        self._resamplers: dict[int, Resampler] = {}
        self._frames: list[AacFrame] = []  # encoded, not yet in a segment
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()  # one encoding step at a time
        self._stop = asyncio.Event()  # the ticker's end (never cancelled inside a step)
        self.failed = 0  # attempts the store refused (logged once per outage)
        self.lost = 0  # segments given up (beyond MAX_UNSTORED_S, or unstored at the end)
        self._unstored: deque[VoiceSegment] = deque()  # in order, for the store to take
        self._store_down = False
        self.pieces_failed = 0  # pieces the live feed did not take (logged once)
        self.failed_task: BaseException | None = None  # what ended the ticker, if not us
        self.ended = False

    @property
    def cut_s(self) -> float:
        """The talk second up to which segments were published."""
        return self._cut / RATE

    @property
    def encoded_s(self) -> float:
        """The talk second up to which the voice was encoded (pieces sent)."""
        return self._encoded / RATE

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
        start = max(self.clock(), self.end_s, self.encoded_s)
        seconds = len(samples) / RATE
        if start + seconds - self.clock() > MAX_AHEAD_S:
            self.dropped_s += seconds
            return
        at = round(start * RATE) - self._encoded
        if len(self.pending) < at + len(samples):
            self.pending = np.concatenate(
                [self.pending, np.zeros(at + len(samples) - len(self.pending), np.int16)])
        self.pending[at:at + len(samples)] = samples
        self.end_s = start + seconds
        self.spoken_s += seconds

    # -- out -----------------------------------------------------------------------------
    def start(self) -> None:
        """Encode pieces and cut segments as the clock passes them, until ``finish``."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(self._ticker_ended)

    async def _run(self) -> None:
        segment = round(self.segment_s * RATE)
        while not self._stop.is_set():
            until = (self._encoded // _PIECE + 1) * _PIECE
            due = until / RATE + PIECE_SETTLE_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), max(0.0, due - self.clock()))
            if self._stop.is_set() or self.clock() < due - PIECE_SETTLE_S:
                continue
            segment_end = self._cut + segment
            if until >= segment_end:
                await self.cut()
            else:
                async with self._lock:
                    await self._piece(self._encode_to(until))

    def _ticker_ended(self, task: asyncio.Task) -> None:
        """The ticker stops only when told to; anything else is a fault, logged once, and
        the track ends (its listeners hear the end rather than silence forever)."""
        if task.cancelled() or self._stop.is_set():
            return
        self.failed_task = task.exception()
        log.error("room voice: the track stopped (%s)", type(self.failed_task).__name__,
                  exc_info=self.failed_task)
        self.abort()

    def _encode_to(self, until: int) -> list[AacFrame]:
        """Encode the talk up to sample ``until`` (speech or silence); the new frames."""
        count = until - self._encoded
        if count <= 0:
            return []
        window = self.pending[:count]
        if len(window) < count:
            window = np.concatenate([window, np.zeros(count - len(window), np.int16)])
        self.pending = self.pending[count:]
        self._encoded = until
        frames = self.encoder.encode(window.astype("<i2").tobytes())
        self._frames += frames
        return frames

    async def _piece(self, frames: list[AacFrame], last: bool = False) -> None:
        if self.on_piece is None or not (frames or last):
            return
        piece = VoicePiece(b"".join(f.data for f in frames),
                           frames[0].pts_s if frames else self.encoded_s, last)
        try:
            await self.on_piece(piece)
        except Exception as exc:  # noqa: BLE001 - the feed's trouble, not the talk's
            self.pieces_failed += 1
            if self.pieces_failed == 1:
                log.warning("room voice: live piece not sent (%s); later ones are "
                            "counted, not logged", type(exc).__name__)

    async def cut(self, last: bool = False) -> VoiceSegment:
        """Encode and publish the next segment (``last``: the track's end, which may be
        shorter and carries what the encoder held back)."""
        async with self._lock:
            until = self._cut + round(self.segment_s * RATE)
            if last:  # up to the end of the speech, in whole AAC frames, at least one
                speech_end = max(round(self.end_s * RATE), self._cut + 1024)
                until = max(min(until, speech_end), self._encoded)
            new = self._encode_to(until)
            if last:
                flushed = self.encoder.flush()
                self._frames += flushed
                new += flushed
            await self._piece(new, last)
            frames, self._frames = self._frames, []
            length = (until - self._cut) / RATE
            segment = VoiceSegment(self.index, b"".join(f.data for f in frames),
                                   frames[0].pts_s if frames else self.cut_s, length)
            self.index += 1
            self._cut = until
            await self._store(segment)
            return segment

    async def _store(self, segment: VoiceSegment | None = None) -> bool:
        """Publish ``segment`` after any the store did not take yet, in order; whether
        none is left waiting. A store that is away (Redis restarting, failing over) costs
        listeners nothing once it is back: what it missed is written then, oldest first,
        as the room's finals are. Waiting segments are bounded (``MAX_UNSTORED_S`` of
        audio; past it the oldest are given up, logged and counted in ``lost``)."""
        if segment is not None:
            self._unstored.append(segment)
        while self._unstored:
            head = self._unstored[0]
            try:
                await self.publish(head)
            except Exception as exc:  # noqa: BLE001 - the store's trouble, not the talk's
                self.failed += 1
                if not self._store_down:
                    self._store_down = True
                    log.warning("room voice: segment %d not stored (%s); kept and written "
                                "again with the next one", head.index, type(exc).__name__)
                while len(self._unstored) * self.segment_s > MAX_UNSTORED_S:
                    gone = self._unstored.popleft()
                    self.lost += 1
                    log.warning("room voice: segment %d given up (the store has been away "
                                "for %.0f s of audio)", gone.index, MAX_UNSTORED_S)
                return False
            self._unstored.popleft()
            if self._store_down and not self._unstored:
                self._store_down = False
                log.info("room voice: the store took the segments it had missed")
        return True

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
        for _ in range(END_RETRIES):  # the store still away: a few more tries, then lost
            if await self._store():
                break
            await asyncio.sleep(END_RETRY_S)
        if self._unstored:
            self.lost += len(self._unstored)
            log.warning("room voice: %d segment(s) not stored by the talk's end",
                        len(self._unstored))
            self._unstored.clear()
        if self.on_end is not None:
            await self.on_end(self.index)

    def abort(self) -> None:
        """Stop without cutting more (the server shuts down past its grace, or the
        ticker failed)."""
        self.ended = True
        self._stop.set()
