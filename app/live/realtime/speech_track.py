"""The translated speech of a WebRTC call, as the remote audio track the browser plays.

OpenAI's guide has the browser play the interpreter's voice from the peer connection
(``pc.ontrack`` → an ``<audio>`` element), so over WebRTC the session's voice does not
become ``session.output_audio.delta`` events: its 24 kHz PCM pieces are played into this
track (``AudioSink``), which aiortc encodes as Opus.

The track is paced by the wall clock: ``recv`` hands out one ``FRAME_MS`` frame per
``FRAME_MS`` of time, speech while any is queued and silence otherwise, so the listener
hears a steady stream and the sender never runs ahead. ``play`` waits while more than
``AHEAD_S`` is queued, so a voice faster than real time is held back by the listener's
clock (the voice stream's own bounds then decide what to speed up or drop, and say so);
memory stays bounded. ``drain`` waits until what was queued has been sent, so
``session.closed`` follows the last spoken word rather than cutting it off.
"""

from __future__ import annotations

import asyncio
import fractions
import time

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

RATE = 24_000  # the session's output rate (``voice_out.OUTPUT_RATE``)
FRAME_MS = 20  # one Opus frame
FRAME_SAMPLES = RATE * FRAME_MS // 1000
AHEAD_S = 2.0  # speech queued before ``play`` waits


class SpeechTrack(MediaStreamTrack):
    """A mono PCM16 audio track: queued speech, else silence, in real time."""

    kind = "audio"

    def __init__(self, ahead_s: float = AHEAD_S) -> None:
        super().__init__()
        self.pending = bytearray()
        self.limit = int(ahead_s * RATE) * 2
        self.changed = asyncio.Event()  # set whenever ``recv`` took from ``pending``
        self.sent_s = 0.0  # speech sent so far (silence not counted)
        self._start: float | None = None
        self._pts = 0

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            wait = self._start + self._pts / RATE - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        size = FRAME_SAMPLES * 2
        data = bytes(self.pending[:size])
        del self.pending[:size]
        if data:
            self.sent_s += len(data) / 2 / RATE
            self.changed.set()
        frame = av.AudioFrame(format="s16", layout="mono", samples=FRAME_SAMPLES)
        frame.planes[0].update(data.ljust(size, b"\0"))
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = fractions.Fraction(1, RATE)
        self._pts += FRAME_SAMPLES
        return frame

    async def play(self, pcm: bytes) -> None:
        """Queue 24 kHz PCM16 mono, waiting while ``AHEAD_S`` is queued already."""
        while len(self.pending) >= self.limit and self.readyState == "live":
            self.changed.clear()
            await self.changed.wait()
        if self.readyState == "live":
            self.pending += pcm[: len(pcm) - len(pcm) % 2]

    async def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until the queued speech has been sent."""
        deadline = time.monotonic() + timeout_s
        while self.pending and self.readyState == "live":
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                return

    def stop(self) -> None:
        super().stop()
        self.pending.clear()
        self.changed.set()  # a waiting ``play`` or ``drain`` returns
