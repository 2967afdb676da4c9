"""One listener's audio track: the room voice's PCM as it arrives, paced by the wall
clock, which aiortc encodes as Opus for the listener's browser or player.

``feed`` never waits (the room's feed serves every listener of a replica from one task, so
one listener must not hold the others). Pieces come in real time, but in bursts after a
stall (a busy replica, Redis slow for a moment): what is queued beyond ``TARGET_S`` is
won back by skipping the pauses in it (silent frames, oldest first), so the listener
returns to the live edge without losing a word; only beyond ``MAX_QUEUED_S`` is speech
dropped from the oldest end. ``recv`` hands out one ``FRAME_MS`` frame per ``FRAME_MS``
of time; after running dry it waits for ``PREBUFFER_S`` queued before speaking again, so
network jitter between pieces is a short pause once rather than a stutter on every
piece. Silence otherwise: the listener's connection stays up between phrases and between
talks.
"""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from app.rooms.voice.aac import RATE

FRAME_MS = 20  # one Opus frame
FRAME_SAMPLES = RATE * FRAME_MS // 1000
PREBUFFER_S = 0.2
TARGET_S = 0.6  # queued beyond this: pauses are skipped
MAX_QUEUED_S = 4.0  # queued beyond this: the oldest speech too
SILENT_RMS = 200  # a frame quieter than this (int16 RMS) is a pause


class ListenerTrack(MediaStreamTrack):
    """Mono PCM16 at the room voice's rate, in real time."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.pending = bytearray()
        self.buffering = True  # until ``PREBUFFER_S`` is queued
        self.heard_s = 0.0  # audio handed to the encoder (what came from the feed)
        self.skipped_s = 0.0  # speech dropped to stay near the live edge
        self.skipped_pause_s = 0.0  # pauses skipped to win back a burst
        self.first_audio_at: float | None = None  # monotonic time of the first fed audio
        self._start: float | None = None
        self._pts = 0

    def feed(self, pcm: bytes) -> None:
        if self.readyState != "live" or not pcm:
            return
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()
        self.pending += pcm[: len(pcm) - len(pcm) % 2]
        if len(self.pending) > int(TARGET_S * RATE) * 2:
            self._skip_pauses(len(self.pending) - int(TARGET_S * RATE) * 2)
        excess = len(self.pending) - int(MAX_QUEUED_S * RATE) * 2
        if excess > 0:
            excess += excess % 2
            del self.pending[:excess]
            self.skipped_s += excess / 2 / RATE

    def _skip_pauses(self, excess: int) -> None:
        """Remove up to ``excess`` bytes of silent frames, oldest first."""
        size = FRAME_SAMPLES * 2
        whole = len(self.pending) // size * size
        blocks = np.frombuffer(bytes(self.pending[:whole]), dtype="<i2").reshape(-1,
                                                                                FRAME_SAMPLES)
        rms = np.sqrt((blocks.astype(np.float64) ** 2).mean(axis=1))
        silent = np.flatnonzero(rms < SILENT_RMS)[: max(0, excess) // size]
        if not len(silent):
            return
        keep = np.ones(len(blocks), dtype=bool)
        keep[silent] = False
        self.pending[:whole] = blocks[keep].tobytes()
        self.skipped_pause_s += len(silent) * FRAME_SAMPLES / RATE

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            wait = self._start + self._pts / RATE - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            elif wait < -1.0:  # the loop was held up: start the clock again from now
                self._start = time.monotonic() - self._pts / RATE
        size = FRAME_SAMPLES * 2
        if self.buffering and len(self.pending) >= int(PREBUFFER_S * RATE) * 2:
            self.buffering = False
        data = b""
        if not self.buffering:
            data = bytes(self.pending[:size])
            del self.pending[:size]
            self.heard_s += len(data) / 2 / RATE
            if len(data) < size:
                self.buffering = True
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(data.ljust(size, b"\0"))
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        self._pts += FRAME_SAMPLES
        return frame

    def stop(self) -> None:
        super().stop()
        self.pending.clear()
