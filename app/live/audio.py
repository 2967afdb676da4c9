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

A final's caption says where the time from the end of its speech went before it was
translated (``stats.speech``, API.md "Speech in"; ``speech_stats``): the silence the
endpoint heard, the audio's wait for its turn, the turn's wait on the recogniser's thread,
the final's decode and the hand-off to the fan-out. Its translation is the caption's own
``queue_wait_ms`` and ``decode_ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Any

import numpy as np

from app.live.frames import log_unexpected
from app.live.pipeline import FanOut
from app.live.publisher import CaptionPublisher, ConnectionGone
from app.live.queue import Update
from app.speech.recognizer import SAMPLE_RATE, FinalTiming, Recognizer, SpeechEvent
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


def _ms(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(max(0.0, end - start) * 1000, 2)


def speech_stats(timing: FinalTiming, newest_audio: float | None,
                 submitted: float) -> dict[str, Any]:
    """A recognised final's ``stats.speech`` (API.md "Speech in"): where its time went
    from the end of its speech until it went to the fan-out, in the order it passed.
    ``newest_audio``: when the newest audio its turn carried arrived; ``submitted``: now
    (``time.monotonic()``). Parts the recogniser did not measure are left out."""
    out: dict[str, Any] = {} if timing.ended_by is None else {"ended_by": timing.ended_by}
    if timing.speech_end_s is not None and timing.heard_s is not None:
        after = max(0.0, timing.heard_s - timing.speech_end_s)
        late = min(after, timing.late_s)
        out |= {"speech_end_s": round(timing.speech_end_s, 3),
                "heard_s": round(timing.heard_s, 3),
                "endpoint_silence_ms": round((after - late) * 1000, 2),
                "late_audio_ms": round(late * 1000, 2)}
    parts = {
        "audio_wait_ms": _ms(newest_audio, timing.asked),
        "asr_wait_ms": _ms(timing.asked, timing.began),
        "asr_behind_partials_ms": None if timing.began is None
        else round(timing.behind_partials_s * 1000, 2),
        "asr_behind_finals_ms": None if timing.began is None
        else round(timing.behind_finals_s * 1000, 2),
        "asr_decode_ms": _ms(timing.began, timing.ended),
        "handoff_ms": _ms(timing.ended, submitted),
    }
    return out | {k: v for k, v in parts.items() if v is not None}


class AudioInput:
    """One audio speaker: frames in (``accept``), updates out (``run``)."""

    def __init__(self, speech: SpeechRecognition, stream: Recognizer, fan: FanOut,
                 publisher: CaptionPublisher, sample_rate: int, max_backlog_s: float,
                 max_frame_bytes: int, pause_translation: bool = True) -> None:
        self.speech = speech
        # partials heard at a pause are translated as their final will be
        # (``app.translation.pause``); off: every partial is an ordinary one
        self.pause_translation = pause_translation
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
        self.newest_at: float | None = None  # when the newest audio in the backlog arrived
        self.taken_newest: float | None = None  # ... of the audio last taken

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
            self.newest_at = time.monotonic()
            self.arrived.set()

    def end(self) -> None:
        """No more audio: recognise the backlog, flush, then let the fan-out finish."""
        self.ended = True
        self.arrived.set()

    def take(self) -> np.ndarray:
        audio = np.concatenate(self.backlog) if self.backlog else np.zeros(0, np.float32)
        self.backlog, self.backlog_samples = [], 0
        self.taken_newest = self.newest_at
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
                await self._recognise(self.speech.feed(self.stream, audio, self._submit))
            await self._recognise(self.speech.flush(self.stream, self._submit))
        finally:
            self.speech.close_stream(self.stream)
            self.fan.stop()

    async def _recognise(self, decode: Awaitable[list[SpeechEvent]]) -> None:
        """One turn of the recogniser; its events go to the fan-out as each decode ends
        (``_submit``), so a final never waits for the turn's later decodes."""
        try:
            events = await decode
        except ConnectionGone:
            raise
        except Exception as exc:  # noqa: BLE001 - one decode's failure, not the talk's
            log_unexpected(log, exc, "speech recognition")
            await self.publisher.error("recognition_failed", "speech recognition failed on "
                                       "this stretch of audio; it was skipped")
            return
        self._submit(events)

    def _submit(self, events: list[SpeechEvent]) -> None:
        """Recognised events to the fan-out, finals with their ``stats.speech``."""
        for event in events:
            final = event.kind == "final"
            speech = None
            if final and event.timing is not None:
                speech = speech_stats(event.timing, self.taken_newest, time.monotonic())
            pause = event.pause and not final and self.pause_translation
            self.fan.submit(Update(event.segment, event.text, final, speech=speech,
                                   pause=pause))
