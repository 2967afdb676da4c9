"""The server's speech recogniser: one Whisper model for every audio speaker, one thread.

Recognition is CPU-heavy (each decode runs Whisper's encoder over a 30 s window) and must
not take the event loop or the engine's scheduler thread, nor more of the CPU than the
operator gave it. So every decode of every speaker runs on a single worker thread with
``threads`` CTranslate2 threads (``serve --asr-threads``): the recogniser's CPU share is
bounded whatever the number of speakers. While a decode runs on the CPU, its ``threads``
cores are lent to it (``app.cores.CoreLoans``): the translation engine's
passes run on the cores left, instead of fighting the decode for them.

Many speakers on that one thread:

* **Admission**: at most ``max_speakers`` streams at once (``serve
  --max-audio-speakers``); one more is refused with ``SpeechBusyError`` (the live
  socket's ``busy`` error frame), as text speakers beyond ``--max-live-sessions`` are.
* **Turns**: each speaker asks for its next turn only after the last one returned, with
  all the audio that arrived meanwhile (``feed``). The thread takes every waiting turn's
  audio into its stream and has its VAD say which decode it needs (cheap), then runs one
  decode chosen by ``app.speech.decode_order``: decodes a final waits for before anyone's
  partials, partials in turn, partials thinned for everyone while a turn has waited too
  long (finals never).
* **Events as they are decoded**: a speaker that passes ``on_events`` gets each decode's
  events on the event loop as soon as that decode ends, in order; a final never waits for
  the later decodes of its turn (another pause in a backlog, the next segment's decode).
* **Partial share**: a stream rations its partial decodes by its share of the thread
  (``ScheduledRecognizer.partial_share``); the share is split between the open streams, so
  partials get rarer for everyone as speakers join, instead of queueing without end.

Each final says where its time went on this thread (``SpeechEvent.timing``, a
``FinalTiming``): when the turn carrying its audio was asked for, when its decode began
and ended, and how much of that wait the thread spent on partial decodes and on decodes
finals wait for, anyone's (the speech-to-screen breakdown of API.md's ``stats.speech``).

The model loads on the first audio speaker (a server without one never pays for it).
Streams are ``Recognizer``s (``app.speech.recognizer``) of the configured engine
(``app.speech.engines``: ``whisper``, faster-whisper's ``StreamingWhisper``, by default).
A ``ScheduledRecognizer`` (the faster-whisper one) is scheduled decode by decode through
its written hooks (``listen``/``due``/``next_decode``/``run``, ``partial_share``); any other
``Recognizer`` is fed whole, one turn at a time, as an urgent turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.cores import CORE_LOANS, CoreLoans
from app.speech.decode_order import BEHIND_S, choose
from app.speech.engines import DEFAULT_ENGINE, RecognizerOptions, engine_named
from app.speech.recognizer import (
    SAMPLE_RATE,
    FinalTiming,
    PlannedDecode,
    Recognizer,
    ScheduledRecognizer,
    SpeechEvent,
)

log = logging.getLogger("livetrans.speech")

# The share of the recogniser's thread partial decodes may take, all speakers together
# (each stream's ``partial_share`` is this divided by the open streams).
PARTIAL_SHARE = 0.5


@dataclass(frozen=True)
class _WholeTurn:
    """A turn run whole (a flush, or a stream that is not a ``ScheduledRecognizer``):
    urgent, since nothing in it can be thinned."""

    kind: str = "whole"
    end: int = 0

    @property
    def urgent(self) -> bool:
        return True

    @property
    def ends_segment(self) -> bool:
        return False


_WHOLE = _WholeTurn()


class SpeechUnavailableError(RuntimeError):
    """This server cannot recognise speech (the speech extra is missing, or the model
    failed to load); the message says what to do, in one sentence."""


class SpeechBusyError(RuntimeError):
    """The recogniser serves as many speakers as it may (``--max-audio-speakers``)."""


@dataclass(eq=False)
class _Turn:
    """One speaker's request: audio to take in (or the end of its speech), and the events
    it made known, handed back through ``future`` when the turn is over (or, with
    ``on_events``, each decode's as that decode ends, on ``loop``)."""

    stream: Recognizer
    audio: np.ndarray | None  # None: the speaker stopped (flush)
    future: concurrent.futures.Future
    on_events: Callable[[list[SpeechEvent]], None] | None = None
    loop: asyncio.AbstractEventLoop | None = None
    enqueued_at: float = field(default_factory=time.monotonic)
    decode: PlannedDecode | None = None
    events: list[SpeechEvent] = field(default_factory=list)
    # the thread's decoding (partials, urgent) so far when the turn was asked for
    busy_at_ask: tuple[float, float] = (0.0, 0.0)


class SpeechRecognition:
    """Streams for audio speakers, their decodes on one bounded worker thread."""

    def __init__(self, model_dir: str | None = None, threads: int = 1, device: str = "auto",
                 on_decode: Callable[[float, float], None] | None = None,
                 max_speakers: int = 1, behind_s: float = BEHIND_S,
                 window: str = "fit", engine: str = DEFAULT_ENGINE,
                 core_loans: CoreLoans | None = CORE_LOANS) -> None:
        # which recogniser a stream is (``app.speech.engines``; ValueError if unknown)
        self.engine = engine_named(engine)
        self.options = RecognizerOptions(model_dir, threads, device, window)
        self.model_dir = model_dir
        self.window = window  # Whisper's encoder window (``app.speech.whisper_window``)
        self.threads = threads
        self.device = device
        self.max_speakers = max_speakers
        self.behind_s = behind_s
        # (seconds of compute, seconds of audio) per decode call: for metrics
        self.on_decode = on_decode
        # a decode on the CPU lends the translation engine's cores it computes on
        # (``app.cores.CoreLoans``); a model on a GPU lends none
        self.core_loans = core_loans
        self._model: Any = None
        self._load_lock = threading.Lock()
        # open streams; one the caller dropped (a start that failed later) leaves by itself
        self._streams: weakref.WeakSet[Any] = weakref.WeakSet()
        self._cond = threading.Condition()
        self._incoming: list[_Turn] = []
        self._turns: list[_Turn] = []  # taken in, waiting for a decode (worker thread only)
        self._stopping = False
        self._thread: threading.Thread | None = None
        # seconds the thread spent decoding (partials, urgent), and the decode running now
        # (urgent?, began): what a turn waited behind (under ``_cond``)
        self._spent = [0.0, 0.0]
        self._running: tuple[bool, float] | None = None

    @property
    def speakers(self) -> int:
        return len(self._streams)

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                reason = self.engine.missing()
                if reason is not None:
                    raise SpeechUnavailableError(reason)
                try:
                    self._model = self.engine.load(self.options)
                    if not self.engine.on_cpu(self._model):
                        self.core_loans = None
                except SpeechUnavailableError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported as one sentence
                    raise SpeechUnavailableError(
                        f"the speech model could not be loaded: {exc}") from None
            return self._model

    async def open_stream(self, language: str) -> Recognizer:
        """A new speaker's stream, a ``Recognizer`` of the configured engine (loads the model
        on first use, off the event loop); ``SpeechBusyError`` beyond ``max_speakers``."""
        if self.speakers >= self.max_speakers:
            raise SpeechBusyError(
                f"server busy: {self.max_speakers} audio speakers are being recognised "
                "(--max-audio-speakers); retry later")
        model = await asyncio.to_thread(self._load)
        if self.speakers >= self.max_speakers:  # others were admitted while it loaded
            raise SpeechBusyError(
                f"server busy: {self.max_speakers} audio speakers are being recognised "
                "(--max-audio-speakers); retry later")
        stream = self.engine.open(model, language, self.options)
        self._streams.add(stream)
        self._share()
        return stream

    async def detect_language(self, audio: np.ndarray,
                              allowed: Collection[str]) -> str | None:
        """The language Whisper hears in ``audio`` (16 kHz float32), among ``allowed``;
        None without enough speech, or when the engine cannot tell languages apart. One
        turn on the recogniser's thread, as a decode."""
        await asyncio.to_thread(self._load)
        if self.engine.probe is None:
            return None
        events = await self._turn(self.engine.probe(self._model, audio, allowed), None)
        return events[0].text if events else None

    def close_stream(self, stream: Recognizer) -> None:
        """The speaker is done: its place goes to the next one."""
        self._streams.discard(stream)
        self._share()

    def _share(self) -> None:
        """Split the partial share between the open streams."""
        streams = list(self._streams)
        for stream in streams:
            if isinstance(stream, ScheduledRecognizer):
                stream.partial_share = PARTIAL_SHARE / max(1, len(streams))

    async def feed(self, stream: Recognizer, samples: np.ndarray,
                   on_events: Callable[[list[SpeechEvent]], None] | None = None,
                   ) -> list[SpeechEvent]:
        """Recognise ``samples`` (16 kHz float32) in the speaker's next turn: the events it
        made known. With ``on_events``, each decode's events go to it instead, on the event
        loop as soon as that decode ends (before the turn's later decodes), in order, and
        the turn returns none."""
        return await self._turn(stream, samples, on_events)

    async def flush(self, stream: Recognizer,
                    on_events: Callable[[list[SpeechEvent]], None] | None = None,
                    ) -> list[SpeechEvent]:
        """The speaker stopped: the segment in progress becomes a final (``on_events`` as
        for ``feed``)."""
        return await self._turn(stream, None, on_events)

    async def _turn(self, stream: Recognizer, audio: np.ndarray | None,
                    on_events: Callable[[list[SpeechEvent]], None] | None = None,
                    ) -> list[SpeechEvent]:
        turn = _Turn(stream, audio, concurrent.futures.Future(), on_events,
                     asyncio.get_running_loop() if on_events is not None else None)
        with self._cond:
            if self._stopping:
                raise RuntimeError("the speech recogniser has stopped")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="livetrans-asr",
                                                daemon=True)
                self._thread.start()
            turn.busy_at_ask = self._busy(turn.enqueued_at)
            self._incoming.append(turn)
            self._cond.notify()
        return await asyncio.wrap_future(turn.future)

    # -- the worker thread -----------------------------------------------------------------
    def _run(self) -> None:
        """The thread: ``_serve`` under a guard. A failure outside any one turn (a bug) is
        logged with its traceback, ends the turns waiting then (their speakers hear of it:
        ``recognition_failed``) and the thread goes on, so no speaker waits forever."""
        while True:
            try:
                self._serve()
                return
            except Exception as exc:  # noqa: BLE001 - the point: it never ends silently
                log.exception("the speech recogniser's thread failed; it goes on")
                with self._cond:
                    self._end_all(exc)
                time.sleep(0.1)

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._incoming and not self._turns and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    self._end_all(RuntimeError("the speech recogniser has stopped"))
                    return
                incoming, self._incoming = self._incoming, []
            for turn in incoming:
                self._guarded(turn, self._take_in)
            choice = choose(self._turns, time.monotonic(), self.behind_s)
            if choice is None:
                continue
            turn = choice.turn
            assert isinstance(turn, _Turn)
            if choice.decode:
                self._guarded(turn, self._decode)
            else:  # thinned: its audio waits in the stream for the next turn
                self._finish(turn)

    def _take_in(self, turn: _Turn) -> None:
        """The turn's audio into its stream, and the decode its VAD asks for (or done)."""
        stream = turn.stream
        if turn.audio is None or not isinstance(stream, ScheduledRecognizer):
            turn.decode = _WHOLE
        else:
            stream.listen(turn.audio)
            turn.decode = stream.next_decode() if stream.due() else None
        if turn.decode is None:
            self._finish(turn)
        else:
            self._turns.append(turn)

    def _busy(self, now: float) -> tuple[float, float]:
        """Seconds the thread has spent decoding partials and urgent decodes by ``now``
        (the decode running counts up to ``now``); the caller holds ``_cond``."""
        partials, urgent = self._spent
        if self._running is not None:
            running_urgent, began = self._running
            if running_urgent:
                urgent += max(0.0, now - began)
            else:
                partials += max(0.0, now - began)
        return partials, urgent

    def _decode(self, turn: _Turn) -> None:
        """Run the turn's decode; a final may leave more to do (another pause in the
        buffer), so the turn stays until its stream needs nothing urgent. The decode's
        events go to the speaker now if it asked for them so (``on_events``): a final
        leaves as soon as it is decoded, not when its turn ends."""
        stream, decode = turn.stream, turn.decode
        assert decode is not None
        urgent = decode.urgent
        with self._cond:
            began = time.monotonic()
            behind = self._busy(began)
            self._running = (urgent, began)
        lending = (nullcontext() if self.core_loans is None
                   else self.core_loans.lent(self.threads))
        try:
            with lending:
                if decode is _WHOLE:
                    audio_s = 0.0 if turn.audio is None else len(turn.audio) / SAMPLE_RATE
                    events = (stream.flush() if turn.audio is None
                              else stream.feed(turn.audio))
                    turn.decode = None
                else:
                    audio_s = decode.end / SAMPLE_RATE
                    events = stream.run(decode)
                    turn.decode = stream.next_decode() if decode.ends_segment else None
        finally:
            with self._cond:
                ended = time.monotonic()
                self._spent[1 if urgent else 0] += ended - began
                self._running = None
        timed = [self._timed(e, turn, behind, began, ended) for e in events]
        if turn.on_events is not None:
            self._hand(turn, timed)
        else:
            turn.events += timed
        if self.on_decode is not None:
            self.on_decode(ended - began, audio_s)
        if turn.decode is None:
            self._finish(turn)

    @staticmethod
    def _timed(event: SpeechEvent, turn: _Turn, behind: tuple[float, float], began: float,
               ended: float) -> SpeechEvent:
        """A final with its turn's times on this thread (what it waited behind: the
        thread's decoding between the turn's ask and this decode)."""
        if event.kind != "final":
            return event
        return dataclasses.replace(event, timing=dataclasses.replace(
            event.timing or FinalTiming(), asked=turn.enqueued_at, began=began, ended=ended,
            behind_partials_s=max(0.0, behind[0] - turn.busy_at_ask[0]),
            behind_finals_s=max(0.0, behind[1] - turn.busy_at_ask[1])))

    @staticmethod
    def _hand(turn: _Turn, events: list[SpeechEvent]) -> None:
        """Hand one decode's events to the turn's speaker on its event loop (before the
        turn's result, so in order); dropped if it stopped waiting, as a turn's are."""
        on_events, loop = turn.on_events, turn.loop
        if not events or on_events is None or loop is None:
            return

        def handed() -> None:
            if not turn.future.cancelled():
                on_events(events)

        try:
            loop.call_soon_threadsafe(handed)
        except RuntimeError:  # its event loop closed: nobody is left to hear them
            pass

    def _guarded(self, turn: _Turn, step: Callable[[_Turn], None]) -> None:
        """``step(turn)``; its failure ends that turn only (the speaker hears of it)."""
        try:
            step(turn)
        except Exception as exc:  # noqa: BLE001 - one turn's failure, not the thread's
            if turn in self._turns:
                self._turns.remove(turn)
            if not turn.future.done():
                turn.future.set_exception(exc)

    def _finish(self, turn: _Turn) -> None:
        if turn in self._turns:
            self._turns.remove(turn)
        if not turn.future.done():
            turn.future.set_result(turn.events)

    def _end_all(self, error: BaseException) -> None:
        for turn in [*self._turns, *self._incoming]:
            if not turn.future.done():
                turn.future.set_exception(error)
        self._turns, self._incoming = [], []

    def close(self) -> None:
        """Stop the worker thread; turns not yet served end with an error."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
