"""Engine jobs: the asyncio side's handle on the step scheduler.

A job is a coroutine function of an engine (``run_update``, a chat completion): it
tokenizes, awaits ``engine.generate`` once or twice (a pathological final is translated
again), and judges the result. It runs as a task on the event loop and sees a
``ScheduledEngine``, whose ``generate`` files the generation with the step scheduler and
awaits a future that the scheduler completes when the sequence is done (``Ticket.on_done``
hops onto the loop with ``call_soon_threadsafe``). So the model only ever runs on the
scheduler's thread, many jobs advance in the same forward passes, and no job holds a
thread while it waits. Streaming callbacks run on the scheduler's thread and hop back onto
the event loop themselves (the chat route's ``on_text``).

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.engine.engine import ContextOverflowError, Engine, GenerationRequest, GenerationResult
from app.engine.jobs import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    JobCancelledError,
    QueueFullError,
    ServerBusyError,
    WorkerStoppedError,
    client_identity,
)
from app.engine.scheduler import (
    GenerationFailedError,
    SchedulerBrokenError,
    SchedulerConfig,
    StepScheduler,
    Ticket,
    mark_logged,
    was_logged,
)
from app.engine.timings import current_timings

__all__ = ["PRIORITY_FINAL", "PRIORITY_PARTIAL", "PRIORITY_REQUEST", "CALLER_ERRORS",
           "EngineWorker", "GenerationFailedError", "JobCancelledError", "QueueFullError",
           "Job", "ScheduledEngine", "SchedulerBrokenError", "ServerBusyError",
           "WorkerStoppedError", "client_identity", "mark_logged", "was_logged"]

log = logging.getLogger("livetrans.worker")

T = TypeVar("T")

# The project's own typed input errors: the caller's fault, forwarded without a traceback.
# Anything else a job raises (a ValueError from numpy, a UnicodeEncodeError from the
# tokenizer...) is a bug: logged with its traceback, and a 500 for the caller.
CALLER_ERRORS: tuple[type[BaseException], ...] = (ContextOverflowError, JobCancelledError)


@dataclass(eq=False)
class _Job:
    priority: int
    seq: int
    client: str
    cancel: threading.Event
    started: threading.Event | None = None
    enqueued_at: float = field(default_factory=time.perf_counter)
    started_at: float | None = None
    counted: bool = True  # still counted as waiting in ``EngineWorker._pending``


class ScheduledEngine:
    """The engine as a job sees it: ``rt`` and an awaitable ``generate`` on the scheduler."""

    def __init__(self, worker: EngineWorker, job: _Job) -> None:
        self._worker = worker
        self._job = job

    @property
    def rt(self):  # noqa: ANN201 - the runtime, for tokenizing
        return self._worker.engine.rt

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        """File ``req`` with the step scheduler and wait, without a thread, until its
        sequence is done (or failed: its error raised)."""
        job = self._job
        if job.cancel.is_set() and job.started_at is None:
            raise JobCancelledError("cancelled before it started")
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def on_done(_ticket: Ticket) -> None:  # the scheduler's thread
            try:
                loop.call_soon_threadsafe(_settle, finished)
            except RuntimeError:  # the event loop is closed (shutdown): nobody waits
                pass

        gen = self._worker.engine.start(req)
        gen.timing.submitted = time.perf_counter()
        ticket = self._worker.scheduler.submit(
            gen, priority=job.priority, client=job.client, order=job.seq, cancel=job.cancel,
            on_admit=lambda: self._worker._mark_started(job), on_done=on_done)
        try:
            await finished
        except asyncio.CancelledError:  # the job's task is torn down: leave the batch
            job.cancel.set()
            raise
        measured = current_timings.get()
        if measured is not None:
            measured.add_generation(gen.timing, time.perf_counter())
        if ticket.error is not None:
            raise ticket.error
        if not ticket.ever_admitted and job.started_at is None:
            raise JobCancelledError("cancelled before it started")
        return ticket.gen.result


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


# What a caller hands the worker: a coroutine function of the job's engine.
Job = Callable[[ScheduledEngine], Awaitable[T]]


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
        # on_restart ("scheduler"): the scheduler's loop restarted after an exception
        self.scheduler = StepScheduler(engine, scheduler, on_step=on_step, on_admit=on_admit,
                                       on_restart=on_restart)
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
        fn: Job[T],
        priority: int = PRIORITY_REQUEST,
        cancel: threading.Event | None = None,
        bypass_limit: bool = False,
        started: threading.Event | None = None,
        seq: int | None = None,
        client: str | None = None,
    ) -> T:
        """Run ``await fn(engine)`` as a task on this event loop and await its result.

        ``bypass_limit`` lets finals in even when the queue is full: a final segment must
        always get its translation. ``started`` is set when the job's first generation gets
        a sequence, so a caller can tell a waiting job (safe to supersede) from a running
        one. ``seq`` (from ``next_seq``) lets a replacement keep the queue position of the
        job it supersedes. ``client`` (default: ``client_identity``) is the fair-share key.
        """
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
        job = _Job(priority=priority, seq=next(self._seq) if seq is None else seq,
                   client=client or client_identity.get() or "anonymous",
                   cancel=cancel or threading.Event(), started=started)
        task = asyncio.ensure_future(self._run_job(job, fn))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # The awaiting task went away (client disconnected, superseded, timed out): the
            # generation leaves the batch at the next step; a job that never started stops
            # counting against the limit now.
            job.cancel.set()
            self._uncount(job)
            # nobody awaits the result any more: consume it so asyncio does not warn
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            raise

    def _refused(self, reason: str) -> None:
        if self.on_refuse is not None:
            self.on_refuse(reason)

    def _mark_started(self, job: _Job) -> None:
        job.started_at = time.perf_counter()
        self._uncount(job)
        if job.started is not None:
            job.started.set()

    def _uncount(self, job: _Job) -> None:
        with self._lock:
            if job.counted:
                job.counted = False
                self._pending -= 1

    def _job_ended(self, job: _Job | None) -> None:
        with self._lock:
            if job is None:
                self._pending -= 1
            elif job.counted:
                job.counted = False
                self._pending -= 1
            self._running -= 1
            self._idle.notify_all()

    async def _run_job(self, job: _Job, fn: Job[T]) -> T:
        try:
            if job.cancel.is_set():
                raise JobCancelledError("cancelled before it started")
            measured = current_timings.get()
            if measured is None:
                return await fn(ScheduledEngine(self, job))
            measured.since("job_start_ms", job.enqueued_at)
            with measured.job():
                return await fn(ScheduledEngine(self, job))
        except Exception as exc:
            if not isinstance(exc, CALLER_ERRORS) and not was_logged(exc):
                log.exception("engine job failed")
                mark_logged(exc)
            raise
        finally:
            # the counts before the result: whoever awaits the job sees it gone from
            # depth and drain
            self._job_ended(job)

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

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Take no more work, let accepted jobs finish (finals first: they rank first) for
        up to ``timeout`` seconds, then stop the scheduler. Awaited on the event loop the
        jobs run on: they go on while a helper thread waits for them."""
        self.stop_accepting()
        if not await asyncio.to_thread(self.drain, timeout):
            log.warning("shutdown: %d engine jobs unfinished after %.0f s", self._running,
                        timeout)
        await asyncio.to_thread(self.scheduler.stop)
