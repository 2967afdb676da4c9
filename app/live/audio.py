"""Speech in on ``/v1/live``: a speaker's PCM frames become the pipeline's updates.

A ``start`` with ``"input": "audio"`` makes the connection an audio source (API.md "Speech
in"): binary frames of mono 16-bit little-endian PCM at the start's ``sample_rate``. Each
frame is checked (whole samples, bounded size), resampled to 16 kHz and added to the
speaker's backlog; a recognition loop hands the whole backlog to the server's recogniser
(``app.speech.service``: one bounded worker thread for every speaker) and submits what it
hears to the fan-out as ``partial`` / ``final`` updates, exactly as a text client's, so
fan-out, rooms and display modes work unchanged. ``end`` (the client's ``stop``, or
shutdown) recognises what is left, turns the segment in progress into a final, and only
then lets the fan-out finish: every word the speaker said before ``stop`` is answered
before ``done``.

The backlog is bounded (``--live-max-audio-backlog-s``): the reader stops reading while
it is full (the client's sends wait in TCP), and a frame that still finds no room is
dropped with one ``audio_overrun`` error frame per episode, never unbounded memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

import numpy as np

from app.live.frames import log_unexpected
from app.live.pipeline import FanOut
from app.live.publisher import CaptionPublisher, ConnectionGone
from app.live.queue import Update
from app.speech.recognizer import SAMPLE_RATE, Recognizer, SpeechEvent
from app.speech.resample import Resampler
from app.speech.service import SpeechRecognition

log = logging.getLogger("livetrans.live")


class AudioFrameError(ValueError):
    """A binary frame that is not usable PCM; becomes one error frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def pcm_samples(frame: bytes, max_bytes: int) -> np.ndarray:
    """A frame's samples as floats on the int16 scale, or ``AudioFrameError``."""
    if len(frame) > max_bytes:
        raise AudioFrameError("too_large", f"audio frame of {len(frame)} bytes; the limit "
                              f"is {max_bytes} (send 100-500 ms per frame)")
    if len(frame) % 2:
        raise AudioFrameError("invalid_audio", f"audio frame of {len(frame)} bytes: 16-bit "
                              "samples come in whole pairs of bytes (mono s16le PCM)")
    return np.frombuffer(frame, dtype="<i2").astype(np.float64)


class AudioInput:
    """One audio speaker: frames in (``accept``), updates out (``run``)."""

    def __init__(self, speech: SpeechRecognition, stream: Recognizer, fan: FanOut,
                 publisher: CaptionPublisher, sample_rate: int, max_backlog_s: float,
                 max_frame_bytes: int) -> None:
        self.speech = speech
        self.stream = stream
        self.fan = fan
        self.publisher = publisher
        self.resampler = Resampler(sample_rate, SAMPLE_RATE)
        self.max_backlog = int(max_backlog_s * SAMPLE_RATE)
        self.max_frame_bytes = max_frame_bytes
        self.backlog: list[np.ndarray] = []
        self.backlog_samples = 0
        self.arrived = asyncio.Event()  # audio (or the end) is waiting for the recogniser
        self.room = asyncio.Event()  # the recogniser took the backlog
        self.ended = False
        self.overrun = False  # an audio_overrun frame was sent for the current episode
        self.dropped_s = 0.0
        self.received_s = 0.0

    @property
    def full(self) -> bool:
        return self.backlog_samples >= self.max_backlog

    def accept(self, frame: bytes) -> None:
        """Queue one frame for recognition (``AudioFrameError`` if it is no PCM). A frame
        that finds the backlog full is dropped: ``dropped_s`` says how much audio."""
        samples = pcm_samples(frame, self.max_frame_bytes)
        audio = (self.resampler.process(samples) / 32768.0).astype(np.float32)
        self.received_s += len(audio) / SAMPLE_RATE
        if self.full:
            self.dropped_s += len(audio) / SAMPLE_RATE
            return
        self.overrun = False
        if len(audio):
            self.backlog.append(audio)
            self.backlog_samples += len(audio)
            self.arrived.set()

    def end(self) -> None:
        """No more audio: recognise the backlog, flush, then let the fan-out finish."""
        self.ended = True
        self.arrived.set()

    def take(self) -> np.ndarray:
        audio = np.concatenate(self.backlog) if self.backlog else np.zeros(0, np.float32)
        self.backlog, self.backlog_samples = [], 0
        self.room.set()
        return audio

    async def run(self) -> None:
        """Recognise until ``end`` and an empty backlog; the fan-out stops after the flush.

        A recognition failure costs the audio of that call (logged, one error frame),
        never the connection; the fan-out is stopped however this ends, so the speaker's
        ``done`` is never held up by a recogniser that died.
        """
        try:
            while True:
                if not self.backlog:
                    if self.ended:
                        break
                    self.arrived.clear()
                    await self.arrived.wait()
                    continue
                audio = self.take()
                await self._recognise(self.speech.feed(self.stream, audio))
            await self._recognise(self.speech.flush(self.stream))
        finally:
            self.speech.close_stream(self.stream)
            self.fan.stop()

    async def _recognise(self, decode: Awaitable[list[SpeechEvent]]) -> None:
        try:
            events = await decode
        except ConnectionGone:
            raise
        except Exception as exc:  # noqa: BLE001 - one decode's failure, not the talk's
            log_unexpected(log, exc, "speech recognition")
            await self.publisher.error("recognition_failed", "speech recognition failed on "
                                       "this stretch of audio; it was skipped")
            return
        for event in events:
            self.fan.submit(Update(event.segment, event.text, event.kind == "final"))
