"""One thread owns the model; everything else queues for it.

llama.cpp contexts are not thread-safe and a CPU can run one forward pass at a time
usefully, so the service funnels every model call through ``EngineWorker``: a bounded
priority queue drained by a single thread. The asyncio side awaits a future; streaming
callbacks hop back onto the event loop with ``call_soon_threadsafe``.

Priorities: finals of live captions go before partials, and requests that are cancelled
(client gone) or superseded (a newer partial of the same segment) before they start are
dropped without costing a forward pass.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.engine.engine import ContextOverflowError, Engine

log = logging.getLogger("livetrans.worker")

T = TypeVar("T")

# Finals first; partials and HTTP requests share one level (first come, first served), so
# neither a flood of requests nor of partials can starve the other.
PRIORITY_FINAL = 0
PRIORITY_REQUEST = 1
PRIORITY_PARTIAL = 1


class QueueFullError(RuntimeError):
    """The engine queue is at capacity (the HTTP layer answers 429)."""


class JobCancelledError(RuntimeError):
    """The job was cancelled or superseded before it ran."""


class WorkerStoppedError(RuntimeError):
    """The worker is shutting down and takes no more work."""


# The project's own typed input errors: the caller's fault, forwarded without a traceback.
# Anything else a job raises (a ValueError from numpy, a UnicodeEncodeError from the
# tokenizer...) is a bug: logged with its traceback, and a 500 for the caller.
CALLER_ERRORS: tuple[type[BaseException], ...] = (ContextOverflowError, JobCancelledError)

_LOGGED = "__livetrans_logged__"


def mark_logged(exc: BaseException) -> None:
    """Remember that ``exc``'s traceback is in the log (the HTTP layer then skips it)."""
    try:
        setattr(exc, _LOGGED, True)
    except AttributeError:  # an exception type without a __dict__
        pass


def was_logged(exc: BaseException) -> bool:
    return bool(getattr(exc, _LOGGED, False))


@dataclass(order=True)
class _Job(Generic[T]):
    priority: int
    seq: int
    fn: Callable[[Engine], T] = field(compare=False)
    loop: asyncio.AbstractEventLoop = field(compare=False)
    future: asyncio.Future = field(compare=False)
    cancel: threading.Event = field(compare=False)
    enqueued_at: float = field(compare=False, default_factory=time.perf_counter)
    started_at: float | None = field(compare=False, default=None)
    started: threading.Event | None = field(compare=False, default=None)
    counted: bool = field(compare=False, default=True)  # still counted in ``_pending``


class EngineWorker:
    """A bounded priority queue in front of one ``Engine`` on one thread."""

    def __init__(self, engine: Engine, max_queue: int = 64) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self._queue: queue.PriorityQueue[_Job[Any]] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._pending = 0
        self._lock = threading.Lock()
        self._accepting = True
        self._thread = threading.Thread(target=self._run, name="engine-worker", daemon=True)
        self.busy_since: float | None = None
        self.jobs_done = 0
        self._thread.start()

    @property
    def depth(self) -> int:
        """Jobs waiting to run (not counting the one running nor cancelled ones)."""
        return max(0, self._pending)

    async def submit(
        self,
        fn: Callable[[Engine], T],
        priority: int = PRIORITY_REQUEST,
        cancel: threading.Event | None = None,
        bypass_limit: bool = False,
        started: threading.Event | None = None,
        seq: int | None = None,
    ) -> T:
        """Run ``fn(engine)`` on the worker thread and await its result.

        ``bypass_limit`` lets finals in even when the queue is full: a final segment must
        always get its translation. ``started`` is set when the job leaves the queue, so a
        caller can tell a waiting job (safe to supersede) from a running one. ``seq`` (from
        ``next_seq``) lets a replacement keep the queue position of the job it supersedes.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if not self._accepting:
                raise WorkerStoppedError("the server is shutting down")
            if not bypass_limit and self._pending >= self.max_queue:
                raise QueueFullError(f"engine queue is full ({self.max_queue} waiting)")
            self._pending += 1
        job: _Job[T] = _Job(
            priority=priority, seq=next(self._seq) if seq is None else seq, fn=fn, loop=loop,
            future=loop.create_future(), cancel=cancel or threading.Event(), started=started,
        )
        self._queue.put(job)
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            # The awaiting task went away (client disconnected, superseded, timed out): stop
            # the generation; a job that never started stops counting against the limit now.
            job.cancel.set()
            self._uncount(job)
            # nobody awaits the result any more: consume it so asyncio does not warn
            job.future.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    def _uncount(self, job: _Job[Any]) -> None:
        with self._lock:
            if job.counted and job.started_at is None:
                job.counted = False
                self._pending -= 1

    @property
    def pending(self) -> int:
        """Jobs waiting that will still run (cancelled ones no longer count)."""
        return self._pending

    def next_seq(self) -> int:
        """A queue position, for callers that want to keep one across resubmissions."""
        return next(self._seq)

    def stop_accepting(self) -> None:
        with self._lock:
            self._accepting = False

    def shutdown(self, timeout: float = 30.0) -> None:
        """Let queued work finish, then stop the thread."""
        self.stop_accepting()
        self._queue.put(_Job(priority=99, seq=next(self._seq), fn=None,  # type: ignore[arg-type]
                             loop=None, future=None, cancel=threading.Event()))  # type: ignore[arg-type]
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job.fn is None:
                return
            with self._lock:
                if job.counted:
                    job.counted = False
                    self._pending -= 1
                job.started_at = time.perf_counter()
            if job.cancel.is_set() or job.future.cancelled():
                self._resolve(job, exc=JobCancelledError("cancelled before it started"))
                continue
            if job.started is not None:
                job.started.set()
            self.busy_since = job.started_at
            try:
                result = job.fn(self.engine)
            except BaseException as exc:  # noqa: BLE001 - forwarded to the awaiting task
                if not isinstance(exc, CALLER_ERRORS):
                    log.exception("engine job failed")
                    mark_logged(exc)
                self._resolve(job, exc=exc)
            else:
                self._resolve(job, result=result)
            finally:
                self.busy_since = None
                self.jobs_done += 1

    @staticmethod
    def _resolve(job: _Job[Any], result: Any = None, exc: BaseException | None = None) -> None:
        def _set() -> None:
            if job.future.done():
                return
            if exc is not None:
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)

        try:
            job.loop.call_soon_threadsafe(_set)
        except RuntimeError:  # the event loop is closed (shutdown)
            pass
