"""Engine jobs: the asyncio side's handle on the step scheduler.

A job is a function of an engine (``run_update``, a chat completion): it tokenizes,
calls ``engine.generate`` once or twice (a pathological final is translated again), and
judges the result. Each job runs on its own short-lived thread and sees a
``ScheduledEngine``, whose ``generate`` files the generation with the step scheduler and
blocks until its sequence is done, so the model itself only ever runs on the scheduler's
thread while many jobs advance in the same forward passes. The asyncio side awaits a
future; streaming callbacks hop back onto the event loop with ``call_soon_threadsafe``.

Bounds: jobs that have not started (no sequence yet) count against ``max_queue``; finals
bypass it, since a final segment must always get its translation. Jobs cancelled (client
gone) or superseded (a newer partial of the same segment) before they start are dropped
without costing a forward pass; once running they leave the batch at the next step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from app.engine.engine import ContextOverflowError, Engine, GenerationRequest, GenerationResult
from app.engine.scheduler import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    ExclusiveScheduler,
    GenerationFailedError,
    SchedulerBrokenError,
    SchedulerConfig,
    mark_logged,
    was_logged,
)

__all__ = ["PRIORITY_FINAL", "PRIORITY_PARTIAL", "PRIORITY_REQUEST", "CALLER_ERRORS",
           "EngineWorker", "GenerationFailedError", "JobCancelledError", "QueueFullError",
           "ScheduledEngine", "SchedulerBrokenError", "ServerBusyError", "WorkerStoppedError",
           "client_identity", "mark_logged", "was_logged"]

log = logging.getLogger("livetrans.worker")

T = TypeVar("T")

# Who a job is for (an API key's hash, a connection): fair share between clients. Set by
# the routes; asyncio tasks inherit it.
client_identity: ContextVar[str | None] = ContextVar("livetrans_client", default=None)


class QueueFullError(RuntimeError):
    """The engine is at capacity (the HTTP layer answers 429)."""


class ServerBusyError(QueueFullError):
    """Queued work already waits longer than the queue-time bound (HTTP 429, ``busy``)."""


class JobCancelledError(RuntimeError):
    """The job was cancelled or superseded before it ran."""


class WorkerStoppedError(RuntimeError):
    """The worker is shutting down and takes no more work."""


# The project's own typed input errors: the caller's fault, forwarded without a traceback.
# Anything else a job raises (a ValueError from numpy, a UnicodeEncodeError from the
# tokenizer...) is a bug: logged with its traceback, and a 500 for the caller.
CALLER_ERRORS: tuple[type[BaseException], ...] = (ContextOverflowError, JobCancelledError)


@dataclass(eq=False)
class _Job(Generic[T]):
    priority: int
    seq: int
    client: str
    fn: Callable[[Any], T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    cancel: threading.Event
    started: threading.Event | None = None
    enqueued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    counted: bool = True  # still counted as waiting in ``EngineWorker._pending``
    exclusive: bool = False


class ScheduledEngine:
    """The engine as a job sees it: ``rt`` and a blocking ``generate`` on the scheduler."""

    def __init__(self, worker: EngineWorker, job: _Job[Any]) -> None:
        self._worker = worker
        self._job = job

    @property
    def rt(self):  # noqa: ANN201 - the runtime, for tokenizing
        return self._worker.engine.rt

    def generate(self, req: GenerationRequest) -> GenerationResult:
        job = self._job
        if job.cancel.is_set() and job.started_at is None:
            raise JobCancelledError("cancelled before it started")
        gen = self._worker.engine.start(req)
        ticket = self._worker.scheduler.submit(
            gen, priority=job.priority, client=job.client, order=job.seq, cancel=job.cancel,
            on_admit=lambda: self._worker._mark_started(job))
        result = self._worker.scheduler.run(ticket)
        if not ticket.ever_admitted and job.started_at is None:
            raise JobCancelledError("cancelled before it started")
        return result


class EngineWorker:
    """Jobs in, results out; the model runs on the step scheduler's thread."""

    def __init__(self, engine: Engine, max_queue: int = 64,
                 scheduler: SchedulerConfig | None = None,
                 max_queue_wait_s: float | None = None,
                 on_step: Callable[..., None] | None = None,
                 on_admit: Callable[..., None] | None = None,
                 on_refuse: Callable[[str], None] | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.on_refuse = on_refuse  # (reason): admission refusals, for metrics
        self.max_queue = max_queue
        self.max_queue_wait_s = max_queue_wait_s
        # on_restart ("scheduler"): the scheduler's loop restarted after an exception. The
        # exclusive kind, for ``submit(exclusive=True)`` (only tests ask for it).
        self.scheduler = ExclusiveScheduler(engine, scheduler, on_step=on_step,
                                            on_admit=on_admit, on_restart=on_restart)
        self._seq = itertools.count()
        self._pending = 0
        self._running = 0
        self._lock = threading.Lock()  # lock order: app/engine/__init__.py
        self._idle = threading.Condition(self._lock)
        self._accepting = True

    @property
    def depth(self) -> int:
        """Jobs waiting for their first sequence (cancelled ones no longer count)."""
        return max(0, self._pending)

    @property
    def busy_since(self) -> float | None:
        """When the scheduler last went from idle to busy (None while idle)."""
        return self.scheduler.busy_since

    @property
    def broken(self) -> str | None:
        """Why the engine can run no more jobs (its scheduler thread cannot continue), or
        None; every job submitted meanwhile fails at once with ``SchedulerBrokenError``."""
        return self.scheduler.broken

    def overload(self) -> str | None:
        """Why new work must be refused right now (None when there is room).

        The queue-time bound: when work of the partial/request rank has already waited
        longer than ``max_queue_wait_s`` for a sequence, more work would only be answered
        later still, so it is refused at once instead (a busy error the client can act on).
        """
        if self.max_queue_wait_s is None:
            return None
        waited = self.scheduler.oldest_wait_s(rank=1)
        if waited > self.max_queue_wait_s:
            return (f"server busy: queued work has waited {waited:.1f} s "
                    f"(limit {self.max_queue_wait_s:g} s); retry later")
        return None

    async def submit(
        self,
        fn: Callable[[Any], T],
        priority: int = PRIORITY_REQUEST,
        cancel: threading.Event | None = None,
        bypass_limit: bool = False,
        started: threading.Event | None = None,
        seq: int | None = None,
        client: str | None = None,
        exclusive: bool = False,
    ) -> T:
        """Run ``fn(engine)`` on a job thread and await its result.

        ``bypass_limit`` lets finals in even when the queue is full: a final segment must
        always get its translation. ``started`` is set when the job's first generation gets
        a sequence, so a caller can tell a waiting job (safe to supersede) from a running
        one. ``seq`` (from ``next_seq``) lets a replacement keep the queue position of the
        job it supersedes. ``client`` (default: ``client_identity``) is the fair-share key.
        ``exclusive`` (tests only, never the server) runs ``fn`` with the raw
        engine on the scheduler's thread while no generation runs
        (``app/engine/sched/exclusive.py``).
        """
        loop = asyncio.get_running_loop()
        broken = self.broken
        if broken is not None:
            raise SchedulerBrokenError(broken)
        with self._lock:
            if not self._accepting:
                raise WorkerStoppedError("the server is shutting down")
            full = not bypass_limit and self._pending >= self.max_queue
            if not full:
                self._pending += 1
                self._running += 1
        if full:
            self._refused("queue_full")
            raise QueueFullError(f"engine queue is full ({self.max_queue} waiting)")
        if not bypass_limit:
            busy = self.overload()
            if busy is not None:
                self._job_ended(None)
                self._refused("busy")
                raise ServerBusyError(busy)
        job: _Job[T] = _Job(
            priority=priority, seq=next(self._seq) if seq is None else seq,
            client=client or client_identity.get() or "anonymous", fn=fn, loop=loop,
            future=loop.create_future(), cancel=cancel or threading.Event(), started=started,
            exclusive=exclusive,
        )
        threading.Thread(target=self._run_job, args=(job,), name="engine-job",
                         daemon=True).start()
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            # The awaiting task went away (client disconnected, superseded, timed out): the
            # generation leaves the batch at the next step; a job that never started stops
            # counting against the limit now.
            job.cancel.set()
            self._uncount(job)
            # nobody awaits the result any more: consume it so asyncio does not warn
            job.future.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise

    def _exclusive_call(self, job: _Job[Any]) -> Any:
        self._mark_started(job)
        return job.fn(self.engine)

    def _refused(self, reason: str) -> None:
        if self.on_refuse is not None:
            self.on_refuse(reason)

    def _mark_started(self, job: _Job[Any]) -> None:
        job.started_at = time.perf_counter()
        self._uncount(job)
        if job.started is not None:
            job.started.set()

    def _uncount(self, job: _Job[Any]) -> None:
        with self._lock:
            if job.counted:
                job.counted = False
                self._pending -= 1

    def _job_ended(self, job: _Job[Any] | None) -> None:
        with self._lock:
            if job is None:
                self._pending -= 1
            elif job.counted:
                job.counted = False
                self._pending -= 1
            self._running -= 1
            self._idle.notify_all()

    def _run_job(self, job: _Job[Any]) -> None:
        try:
            if job.cancel.is_set() or job.future.cancelled():
                raise JobCancelledError("cancelled before it started")
            if job.exclusive:
                result = self.scheduler.run_exclusive(lambda: self._exclusive_call(job))
            else:
                result = job.fn(ScheduledEngine(self, job))
        except BaseException as exc:  # noqa: BLE001 - forwarded to the awaiting task
            if not isinstance(exc, CALLER_ERRORS) and not was_logged(exc):
                log.exception("engine job failed")
                mark_logged(exc)
            # the counts first: whoever awaits the job sees it gone from depth and drain
            self._job_ended(job)
            self._resolve(job, exc=exc)
        else:
            self._job_ended(job)
            self._resolve(job, result=result)

    def next_seq(self) -> int:
        """A queue position, for callers that want to keep one across resubmissions."""
        return next(self._seq)

    def stop_accepting(self) -> None:
        with self._lock:
            self._accepting = False

    def drain(self, timeout: float) -> bool:
        """Wait until every accepted job has finished (True) or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._running > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def shutdown(self, timeout: float = 30.0) -> None:
        """Take no more work, let accepted jobs finish (finals first: they rank first) for
        up to ``timeout`` seconds, then stop the scheduler."""
        self.stop_accepting()
        if not self.drain(timeout):
            log.warning("shutdown: %d engine jobs unfinished after %.0f s", self._running,
                        timeout)
        self.scheduler.stop()

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
