"""The server's speech recogniser: one Whisper model for every audio speaker, one thread.

Recognition is CPU-heavy (each decode runs Whisper's encoder over a 30 s window) and must
not take the event loop or the engine's scheduler thread, nor more of the CPU than the
operator gave it. So every decode of every speaker runs on a single worker thread, in
the order they were asked for, with ``threads`` CTranslate2 threads (``serve
--asr-threads``): the recogniser's CPU share is bounded whatever the number of speakers.
Each speaker asks for its next decode only after the last one returned, with all the
audio that arrived meanwhile, so speakers take turns (round robin) and a recogniser that
falls behind decodes less often instead of queueing without end.

The model loads on the first audio speaker (a server without one never pays for it).
Streams are ``Recognizer``s (``app.speech.recognizer``); ``open_stream`` makes the
faster-whisper one, ``feed`` and ``flush`` take any.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from app.speech.recognizer import SAMPLE_RATE, Recognizer, SpeechEvent
from app.speech.whisper_stream import StreamingWhisper, load_whisper


class SpeechUnavailableError(RuntimeError):
    """This server cannot recognise speech (the speech extra is missing, or the model
    failed to load); the message says what to do, in one sentence."""


def missing_dependency() -> str | None:
    """Why speech input cannot work in this installation, or None when it can."""
    try:
        import faster_whisper  # noqa: F401
    except ImportError:
        return ("this server has no speech recogniser installed: "
                "pip install 'livetrans[speech]'")
    return None


def pick_device(device: str) -> str:
    """``auto`` is ``cuda`` when CTranslate2 sees a GPU, else ``cpu``."""
    if device != "auto":
        return device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


class SpeechRecognition:
    """Streams for audio speakers, their decodes on one bounded worker thread."""

    def __init__(self, model_dir: str | None = None, threads: int = 1, device: str = "auto",
                 on_decode: Callable[[float, float], None] | None = None) -> None:
        self.model_dir = model_dir
        self.threads = threads
        self.device = device
        # (seconds of compute, seconds of audio) per decode call: for metrics
        self.on_decode = on_decode
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="livetrans-asr")
        self._model: Any = None
        self._load_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                reason = missing_dependency()
                if reason is not None:
                    raise SpeechUnavailableError(reason)
                try:
                    self._model = load_whisper(self.model_dir, self.threads,
                                               pick_device(self.device))
                except SpeechUnavailableError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported as one sentence
                    raise SpeechUnavailableError(
                        f"the speech model could not be loaded: {exc}") from None
            return self._model

    async def open_stream(self, language: str) -> StreamingWhisper:
        """A new speaker's stream, a faster-whisper ``Recognizer`` (loads the model on first
        use, off the event loop)."""
        loop = asyncio.get_running_loop()
        model = await loop.run_in_executor(self.executor, self._load)
        return StreamingWhisper(model=model, language=language)

    async def feed(self, stream: Recognizer, samples: np.ndarray) -> list[SpeechEvent]:
        """Recognise ``samples`` (16 kHz float32) on the worker thread."""
        return await self._run(stream.feed, samples, len(samples) / SAMPLE_RATE)

    async def flush(self, stream: Recognizer) -> list[SpeechEvent]:
        """The speaker stopped: the segment in progress becomes a final."""
        return await self._run(stream.flush, None, 0.0)

    async def _run(self, call: Callable[..., list[SpeechEvent]], arg: Any,
                   audio_s: float) -> list[SpeechEvent]:
        def timed() -> list[SpeechEvent]:
            began = time.perf_counter()
            events = call() if arg is None else call(arg)
            if self.on_decode is not None:
                self.on_decode(time.perf_counter() - began, audio_s)
            return events

        return await asyncio.get_running_loop().run_in_executor(self.executor, timed)

    def close(self) -> None:
        """Stop the worker thread; decodes not yet started are dropped."""
        self.executor.shutdown(wait=False, cancel_futures=True)
