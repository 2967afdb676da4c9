"""A voice that speaks committed text as it commits: commits in, PCM chunks out.

``VoiceStream`` is a ``CommitListener`` (``app.translation.commits``) for one language: each
commit's ``delta`` (a phrase) is queued at once, spoken by the language's ``Synthesizer``
on an executor's thread (never on the event loop, never on the engine's thread), one
phrase at a time and in commit order, and handed to one async consumer
(``async for chunk in stream.chunks()``): a live connection's binary frames, the realtime
API's ``session.output_audio.delta``.

A voice that falls behind the speaker speeds up (``app.voice.catchup``) rather than
skipping. Memory is bounded twice: at most ``max_buffered`` chunks wait for a slow
consumer (then synthesis waits), and at most ``max_pending_s`` seconds of text wait for
synthesis; past that the oldest phrases are dropped (down to half the bound), counted and
reported (``on_loss``), never silently. A phrase an engine cannot speak is reported the same way.

``VoiceMetrics`` is what the server counts of every stream (``/metrics``): audio spoken and
the time its synthesis took, per engine (their ratio is the engine's real-time factor on
this machine), how long after its commit each phrase starts to be heard, and the phrases
lost by reason. Never text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from app.cores import CORE_LOANS
from app.translation.commits import Commit
from app.voice.base import Synthesizer, duration_s
from app.voice.catchup import CatchUp, speech_s

log = logging.getLogger("livetrans.voice")

MAX_PENDING_S = 60.0  # seconds of text (at speed 1.0) waiting for synthesis, at most
MAX_BUFFERED = 8  # synthesized chunks waiting for the consumer, at most


@dataclass(frozen=True)
class VoiceChunk:
    """One phrase spoken: PCM16 mono at ``sample_rate``, for ``segment`` in ``lang``."""

    lang: str
    segment: int
    final: bool  # the segment's last phrase
    pcm: bytes
    sample_rate: int
    speed: float  # how much faster than the voice's own pace it was spoken

    @property
    def seconds(self) -> float:
        return duration_s(self.pcm, self.sample_rate)


@dataclass(frozen=True)
class VoiceLoss:
    """Committed text that will not be heard: ``overrun`` (the voice fell more than
    ``max_pending_s`` behind), ``failed`` (the engine could not speak it) or ``closed``
    (the stream ended before it was spoken)."""

    lang: str
    reason: str
    phrases: int
    chars: int


@dataclass
class VoiceStats:
    """What a stream did, for a ``done`` summary, metrics and tests (never text)."""

    phrases: int = 0  # phrases queued
    spoken: int = 0  # phrases handed to the consumer
    spoken_s: float = 0.0  # seconds of audio handed to the consumer
    lost_phrases: int = 0
    lost_chars: int = 0
    losses: dict[str, int] = field(default_factory=dict)  # reason -> phrases
    max_speed: float = 1.0


@dataclass(frozen=True)
class VoiceMetrics:
    """Callbacks the server's metrics give every stream (``app.api.metrics``)."""

    # (language, engine, seconds of audio, seconds its synthesis took, seconds from the
    # phrase's commit to when its speech starts, played in real time)
    spoken: Callable[[str, str, float, float, float], None]
    lost: Callable[[str, int], None]  # (reason, phrases)


@dataclass
class _Phrase:
    text: str
    segment: int
    final: bool
    at: float  # when it was committed (the stream's clock)


_END = object()


class VoiceStream:
    """Speaks one language's commits; see the module's docstring. ``committed`` is called
    on the event loop (as every ``CommitListener`` is)."""

    def __init__(self, synth: Synthesizer, *, executor: Executor | None = None,
                 catch_up: CatchUp | None = None, max_pending_s: float = MAX_PENDING_S,
                 max_buffered: int = MAX_BUFFERED,
                 on_loss: Callable[[VoiceLoss], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 metrics: VoiceMetrics | None = None, cores: int = 1) -> None:
        self.synth = synth
        # the cores a phrase's synthesis computes on, lent by the translation engine
        # meanwhile (``app.cores``): the voices' threads (``--voice-threads``)
        self.cores = cores
        self.lang = synth.info.lang
        self.sample_rate = synth.info.sample_rate
        self._own_executor = executor is None
        self.executor = executor or ThreadPoolExecutor(1, thread_name_prefix="voice")
        self.catch_up = catch_up or CatchUp()
        self.max_pending_s = max_pending_s
        self.on_loss = on_loss
        self._clock = clock
        self.metrics = metrics
        self.stats = VoiceStats()
        self._pending: deque[_Phrase] = deque()
        self._pending_s = 0.0
        self._out: asyncio.Queue[VoiceChunk | object] = asyncio.Queue(max_buffered)
        self._wake = asyncio.Event()
        self._closing = False
        self._ended = False
        self._worker: asyncio.Task | None = None
        self._play_end = 0.0  # when the audio handed out so far ends, played in real time

    # -- in ------------------------------------------------------------------------------
    def committed(self, commit: Commit) -> None:
        """Queue the commit's phrase (other languages' commits are not this voice's).
        Returns at once and never raises."""
        try:
            if commit.lang != self.lang or not commit.delta.strip():
                return
            phrase = _Phrase(commit.delta, commit.segment, commit.final, self._now())
            if self._closing:
                self._lose("closed", [phrase])
                return
            self._pending.append(phrase)
            self._pending_s += speech_s(phrase.text)
            self.stats.phrases += 1
            if self._pending_s > self.max_pending_s:
                self._shed()
            self._wake.set()
            self._start()
        except Exception:  # noqa: BLE001 - a listener never raises into the caption path
            log.exception("voice: a commit could not be queued")

    def _shed(self) -> None:
        """Past the hard bound: drop the oldest phrases (the newest are nearest the
        speaker) down to half the bound, and report them. Half, not just under it: a voice
        that cannot keep up at all would otherwise shed (and report) on every commit."""
        dropped: list[_Phrase] = []
        while self._pending_s > self.max_pending_s / 2 and len(self._pending) > 1:
            phrase = self._pending.popleft()
            self._pending_s -= speech_s(phrase.text)
            dropped.append(phrase)
        self._lose("overrun", dropped)

    def _lose(self, reason: str, phrases: list[_Phrase]) -> None:
        if not phrases:
            return
        chars = sum(len(p.text) for p in phrases)
        self.stats.lost_phrases += len(phrases)
        self.stats.lost_chars += chars
        self.stats.losses[reason] = self.stats.losses.get(reason, 0) + len(phrases)
        if self.metrics is not None:
            self.metrics.lost(reason, len(phrases))
        if self.on_loss is not None:
            try:
                self.on_loss(VoiceLoss(self.lang, reason, len(phrases), chars))
            except Exception:  # noqa: BLE001 - a reporter's bug must not stop the voice
                log.exception("voice: on_loss failed")

    # -- the worker ----------------------------------------------------------------------
    def _now(self) -> float:
        if self._clock is not None:
            return self._clock()
        return asyncio.get_running_loop().time()

    def _start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run())
            # a task cancelled before its first step never runs its ``finally``
            self._worker.add_done_callback(lambda _: self._finish())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        phrase: _Phrase | None = None  # taken from the queue, not yet handed out
        try:
            while True:
                while not self._pending:
                    if self._closing:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                phrase = self._pending.popleft()
                self._pending_s -= speech_s(phrase.text)
                now = self._now()
                # when this phrase's speech would start, behind the audio already out,
                # and what waits after it: how far the voice is behind the speaker
                lag = max(now, self._play_end) - phrase.at + max(0.0, self._pending_s)
                speed = self.catch_up.speed(lag)
                began = loop.time()
                try:
                    # a voice computes on the CPU: the engine leaves it its cores meanwhile
                    pcm = await loop.run_in_executor(self.executor, CORE_LOANS.run,
                                                     self.cores, self.synth.synthesize,
                                                     phrase.text, speed)
                except Exception as exc:  # noqa: BLE001 - SynthesisError or an engine bug
                    log.warning("voice %s (%s): a phrase failed: %s", self.lang,
                                self.synth.info.engine, type(exc).__name__)
                    self._lose("failed", [phrase])
                    phrase = None
                    continue
                if not pcm:
                    phrase = None
                    continue
                chunk = VoiceChunk(self.lang, phrase.segment, phrase.final, pcm,
                                   self.sample_rate, speed)
                starts = max(self._now(), self._play_end)
                self._play_end = starts + chunk.seconds
                if self.metrics is not None:
                    self.metrics.spoken(self.lang, self.synth.info.engine, chunk.seconds,
                                        loop.time() - began, starts - phrase.at)
                await self._out.put(chunk)
                phrase = None
                self.stats.spoken += 1
                self.stats.spoken_s += chunk.seconds
                self.stats.max_speed = max(self.stats.max_speed, speed)
        finally:
            self._finish([phrase] if phrase is not None else [])

    def _finish(self, cut: list[_Phrase] | None = None) -> None:
        """The worker ended: what is still queued (and ``cut``, the phrase it was
        speaking when cancelled) is lost (closed); the consumer's iteration ends after
        what it has not read yet."""
        if self._ended:
            return
        left = [*(cut or []), *self._pending]
        self._pending.clear()
        self._pending_s = 0.0
        self._lose("closed", left)
        self._ended = True
        with contextlib.suppress(asyncio.QueueFull):
            self._out.put_nowait(_END)

    # -- out -----------------------------------------------------------------------------
    async def chunks(self) -> AsyncIterator[VoiceChunk]:
        """Every chunk, in commit order, until the stream is closed and flushed."""
        while True:
            if self._ended and self._out.empty():
                return
            item = await self._out.get()
            if item is _END:
                return
            assert isinstance(item, VoiceChunk)
            yield item

    async def close(self, timeout_s: float | None = None) -> None:
        """No more commits; speak what is queued (a consumer must be reading
        ``chunks``), then end the consumer's iteration. After ``timeout_s`` what is
        still unspoken is dropped and reported (``closed``)."""
        self._closing = True
        self._wake.set()
        worker = self._worker
        try:
            if worker is not None and not worker.done():
                try:
                    async with asyncio.timeout(timeout_s):
                        await asyncio.shield(worker)
                except TimeoutError:
                    worker.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await worker
            elif worker is None:
                self._finish()
        finally:
            if self._own_executor:
                self.executor.shutdown(wait=False, cancel_futures=True)

    def abort(self) -> None:
        """The consumer is gone: stop at once; what is unspoken is reported lost."""
        self._closing = True
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
        elif self._worker is None:
            self._finish()
        if self._own_executor:
            self.executor.shutdown(wait=False, cancel_futures=True)
