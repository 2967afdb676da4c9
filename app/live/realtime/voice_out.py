"""Translated speech out: a leg's commits spoken, as ``session.output_audio.delta``.

A voice stream (``app.voice.stream.VoiceStream``: commits in, PCM chunks out, one phrase
at a time, bounded) speaks each commit's delta in the output language; this turns its
chunks into the protocol's audio deltas: PCM16 mono resampled to the session's 24 kHz
(``app.speech.resample``), cut into pieces of at most ``PIECE_S`` so that a long phrase
starts playing before all of it is encoded, base64. ``finish`` lets the voice say what is
queued before ``session.closed``; ``abort`` stops it when the client left.

Over WebRTC the speech is a remote audio track instead of events: the transport gives an
``AudioSink`` (``app.live.realtime.webrtc.SpeechTrack``) and the same 24 kHz pieces are
played into it; its ``play`` waits while the track holds enough, so a voice faster than
real time is paced by the listener's clock, as the voice stream expects.

Only the voice stream's duck type is used (``VoiceSource``), so this module stands on the
commit seam alone.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import numpy as np

from app.live.frames import log_unexpected
from app.live.realtime import events
from app.speech.resample import Resampler
from app.translation.commits import Commit

log = logging.getLogger("livetrans.realtime")

OUTPUT_RATE = 24_000  # the protocol's output audio rate
PIECE_S = 1.0  # the longest audio delta
FINISH_S = 60.0  # what the voice still has to say at session.close, at most this long


class VoiceChunk(Protocol):
    pcm: bytes
    sample_rate: int


class AudioSink(Protocol):
    """Where 24 kHz PCM16 mono goes instead of audio delta events (a WebRTC track)."""

    async def play(self, pcm: bytes) -> None: ...

    async def drain(self, timeout_s: float) -> None: ...


class VoiceSource(Protocol):
    def committed(self, commit: Commit) -> None: ...

    def chunks(self) -> AsyncIterator[Any]: ...

    async def close(self, timeout_s: float | None = None) -> None: ...

    def abort(self) -> None: ...


def to_output_rate(pcm: bytes, rate: int, resampler: Resampler | None) -> tuple[bytes,
                                                                              Resampler | None]:
    """``pcm`` (PCM16 mono at ``rate``) at 24 kHz, with the resampler to keep for the
    stream's next chunk (exact across chunks)."""
    if rate == OUTPUT_RATE:
        return pcm, None
    if resampler is None or resampler.rate_in != rate:
        resampler = Resampler(rate, OUTPUT_RATE)
    out = resampler.process(np.frombuffer(pcm, dtype="<i2").astype(np.float64))
    return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes(), resampler


class VoiceOut:
    """One leg's voice, its chunks sent as audio deltas while the leg runs."""

    def __init__(self, voice: VoiceSource, send: Callable[[dict[str, Any]], Awaitable[None]],
                 elapsed_ms: Callable[[], int], sink: AudioSink | None = None) -> None:
        self.voice = voice
        self.send = send
        self.elapsed_ms = elapsed_ms
        self.sink = sink
        self.task = asyncio.create_task(self._run())

    def committed(self, segment: int, lang: str, text: str, delta: str) -> None:
        self.voice.committed(Commit(segment, lang, text, delta, False))

    async def _run(self) -> None:
        resampler: Resampler | None = None
        piece = int(PIECE_S * OUTPUT_RATE) * 2
        async for chunk in self.voice.chunks():
            pcm, resampler = to_output_rate(chunk.pcm, chunk.sample_rate, resampler)
            for i in range(0, len(pcm), piece):
                try:
                    if self.sink is not None:
                        await self.sink.play(pcm[i:i + piece])
                        continue
                    await self.send(events.audio_delta(
                        base64.b64encode(pcm[i:i + piece]).decode("ascii"), OUTPUT_RATE,
                        self.elapsed_ms()))
                except Exception:  # noqa: BLE001 - the client is gone: nobody listens
                    self.voice.abort()
                    return

    async def finish(self, timeout_s: float = FINISH_S) -> None:
        """Say what is queued (bounded), then stop; a track plays out what it holds."""
        try:
            await self.voice.close(timeout_s)
            await asyncio.wait({self.task}, timeout=timeout_s)
            if self.sink is not None:
                await self.sink.drain(timeout_s)
        finally:
            self.abort()

    def abort(self) -> None:
        self.voice.abort()
        if not self.task.done():
            self.task.cancel()
        self.task.add_done_callback(_settle)


def _settle(task: asyncio.Task) -> None:
    if task.cancelled():
        return
    crash = task.exception()
    if crash is not None:
        log_unexpected(log, crash, "realtime voice")
