"""The step scheduler's thread: a thin loop around the policy, under a supervisor.

Each round, under the lock: ``policy.plan()``; outside it: ``Engine.step`` over the plan's
generations; under the lock again: ``policy.update()``, and the waiters of every ticket the
policy handed back are woken. The rules (admission, priorities, fair share, preemption,
cancellation, a failed pass) are the policy's (``app.engine.sched.policy``); this module
owns the thread, the lock, the callbacks and the recovery from failures.

Failures. The thread runs its loop under a supervisor, so that no exception ends it
silently while every job waits forever. A failed forward pass fails the generations in it
(``policy.update`` with the error). A failure tied to one generation fails that one only
(the policy's). Any other exception is logged once with its traceback, counted
(``on_restart``) and the loop starts again after a backoff (``restart_backoff_s``) from a
known state (``policy.reset``: running generations requeued, every cache forgotten). When
the loop fails once more than the backoff has steps without completing a round in between,
or the thread ends, the scheduler is broken: ``broken`` says why, and every waiting,
running and later job ends with ``SchedulerBrokenError`` (HTTP 503).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from app.engine.engine import Engine, StepReport
from app.engine.generation import GenerationResult
from app.engine.sched.errors import SchedulerBrokenError, describe, mark_logged
from app.engine.sched.policy import SchedulerConfig, StepPlan, StepPolicy, Ticket
from app.engine.sequence import SequenceGeneration

log = logging.getLogger("livetrans.scheduler")


class StepScheduler:
    """Runs generations of many callers in shared steps, on its own thread."""

    def __init__(self, engine: Engine, config: SchedulerConfig | None = None,
                 on_step: Callable[[StepReport, int, int], None] | None = None,
                 on_admit: Callable[[Ticket, float], None] | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.config = config or SchedulerConfig()
        self.policy = StepPolicy(engine, self.config, on_admit=on_admit)
        self.on_step = on_step  # (report, sequences running, sequences in the context)
        self.on_restart = on_restart  # ("scheduler"): the loop restarted, for metrics
        self.steps = 0
        self.restarts = 0
        self.busy_since: float | None = None
        self._rounds = 0  # loop rounds completed (a forward pass each)
        self._broken: str | None = None
        self._cond = threading.Condition()  # lock order: app/engine/__init__.py
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="step-scheduler", daemon=True)
        self._thread.start()

    # -- the policy's state, for callers and metrics ---------------------------------------
    @property
    def on_admit(self) -> Callable[[Ticket, float], None] | None:
        return self.policy.on_admit  # (ticket, seconds it waited)

    @on_admit.setter
    def on_admit(self, fn: Callable[[Ticket, float], None] | None) -> None:
        self.policy.on_admit = fn

    @property
    def waiting(self) -> list[Ticket]:
        return self.policy.waiting

    @property
    def active(self) -> list[Ticket]:
        return self.policy.active

    @property
    def preemptions(self) -> int:
        return self.policy.preemptions

    @property
    def finished_by_priority(self) -> Counter[str]:
        return self.policy.finished_by_priority

    # -- callers ---------------------------------------------------------------------------
    def submit(self, gen: SequenceGeneration, *, priority: int, client: str, order: int,
               cancel: threading.Event, on_admit: Callable[[], None] | None = None,
               on_done: Callable[[Ticket], None] | None = None) -> Ticket:
        """File ``gen``; ``on_done(ticket)`` is called once it is finished (on the
        scheduler's thread, or on this one when the scheduler takes no more work)."""
        ticket = Ticket(gen=gen, priority=priority, client=client, order=order, cancel=cancel,
                        on_admit=on_admit, on_done=on_done)
        with self._cond:
            if self._stopping or self._broken is not None:
                if self._broken is not None:
                    ticket.error = self._broken_error()
                gen.fail("cancelled" if ticket.error is None else "error")
                self._finish(ticket)
                return ticket
            self.policy.add(ticket)
            self._cond.notify()
        return ticket

    def run(self, ticket: Ticket) -> GenerationResult:
        """Block until ``ticket`` is finished; its result (or its error, raised). For
        callers on a thread of their own (the scheduler's tests); the server's jobs await
        ``on_done`` instead (``app.engine.worker``)."""
        self._wait(ticket.done)
        if ticket.error is not None:
            raise ticket.error
        return ticket.gen.result

    def oldest_wait_s(self, rank: int = 1) -> float:
        """How long the longest-waiting generation of ``rank`` has waited (0 if none)."""
        with self._cond:
            return self.policy.oldest_wait_s(rank)

    @property
    def depth(self) -> int:
        return len(self.policy.waiting)

    @property
    def broken(self) -> str | None:
        """Why the scheduler can run no more generations (one line), None while it can."""
        if self._broken is None and not self._stopping and not self._thread.is_alive():
            return "the scheduler thread is not running"
        return self._broken

    def stop(self, timeout: float = 5.0) -> None:
        """Stop stepping; whatever still waits or runs ends as cancelled."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)

    def _wait(self, done: threading.Event) -> None:
        """Wait for ``done``. The thread's exit ends every job, so this cannot wait for a
        thread that is gone; should that ever fail, a job still never waits forever."""
        while not done.wait(1.0):
            if not self._thread.is_alive():
                self._break(self.broken or "the scheduler thread is not running")

    # -- the supervisor --------------------------------------------------------------------
    def _run(self) -> None:
        """The thread: ``_loop`` under a supervisor (module docstring, "Failures")."""
        failures, rounds_seen = 0, -1
        try:
            while True:
                try:
                    if failures:
                        self._recover()
                    self._loop()
                    return
                except Exception as exc:  # noqa: BLE001 - the point: nothing ends it silently
                    if self._rounds != rounds_seen:  # it ran a while since the last failure
                        failures = 0
                    rounds_seen = self._rounds
                    failures += 1
                    if not self._restart_after(exc, failures):
                        return
        except BaseException as exc:  # noqa: BLE001 - logged here once, not by excepthook
            log.critical("the scheduler thread ended", exc_info=exc)
            if not self._stopping:
                self._break(f"the scheduler thread ended unexpectedly ({describe(exc)})")
        finally:
            if self._broken is None and not self._stopping:
                self._break("the scheduler thread ended unexpectedly")

    def _restart_after(self, exc: Exception, failures: int) -> bool:
        """Log ``exc`` once, count it and wait out the backoff (True: go on), or break the
        scheduler when it has failed more times in a row than the backoff has steps."""
        backoff = self.config.restart_backoff_s
        if failures > len(backoff):
            log.error("the scheduler loop failed %d times in a row; it stops, and every "
                      "job ends with an error", failures, exc_info=exc)
            self._break(f"the scheduler loop failed {failures} times in a row "
                        f"(last: {describe(exc)})")
            return False
        delay = backoff[failures - 1]
        log.error("the scheduler loop failed (%s); restarting in %.1f s", describe(exc),
                  delay, exc_info=exc)
        self.restarts += 1
        if self.on_restart is not None:
            try:
                self.on_restart("scheduler")
            except Exception:  # noqa: BLE001 - a metrics callback does not stop a restart
                log.warning("the scheduler's restart callback failed", exc_info=True)
        with self._cond:
            self._cond.wait_for(lambda: self._stopping, delay)
        return True

    def _recover(self) -> None:
        """Back to a known state after an unexpected exception (``StepPolicy.reset``)."""
        with self._cond:
            try:
                self.policy.reset()
            finally:
                self._hand_back()

    def _break(self, reason: str) -> None:
        """The thread cannot continue: say why from now on (``broken``, /health) and end
        every waiting and running job with an error naming it."""
        with self._cond:
            if self._broken is None:
                self._broken = reason
            try:
                self.policy.abort("error", error=self._broken_error)
            finally:
                self._hand_back()
            self.busy_since = None

    def _broken_error(self) -> SchedulerBrokenError:
        """A fresh error per job (one exception object raised on many threads would share
        one traceback), marked as logged: the cause was logged when it happened."""
        exc = SchedulerBrokenError(self._broken or "the scheduler thread is not running")
        mark_logged(exc)
        return exc

    def _hand_back(self) -> None:
        """Wake the waiters of every ticket the policy handed back (under ``_cond``)."""
        for t in self.policy.take_finished():
            self._finish(t)

    @staticmethod
    def _finish(ticket: Ticket) -> None:
        """Tell ``ticket``'s waiters it is finished: its event, and its callback (which
        must not block: it hands the news to another thread or loop)."""
        ticket.done.set()
        if ticket.on_done is not None:
            try:
                ticket.on_done(ticket)
            except Exception:  # noqa: BLE001 - one waiter's failure is not the scheduler's
                log.exception("a finished generation's callback failed")

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self.policy.has_work or self._stopping):
                    self.busy_since = None
                    self._cond.wait()
                if self._stopping:
                    self._stop_everything()
                    return
                if self.busy_since is None:
                    self.busy_since = time.perf_counter()
                try:
                    plan = self.policy.plan()
                finally:
                    self._hand_back()
            if not plan.batch:
                continue
            self._step(plan)
            self._rounds += 1

    def _stop_everything(self) -> None:
        try:
            self.policy.abort("cancelled")
        finally:
            self._hand_back()

    def _step(self, plan: StepPlan) -> None:
        """One forward pass over ``plan``, then hand back what finished (or failed)."""
        try:
            report = self.engine.step(plan.gens, plan.budget, plan.chunk)
        except Exception as exc:  # noqa: BLE001 - one failed step fails its sequences
            log.exception("a step failed; %d generations end with an error", len(plan.batch))
            mark_logged(exc)
            with self._cond:
                try:
                    self.policy.update(plan, error=exc)
                finally:
                    self._hand_back()
            return
        self.steps += 1
        if self.on_step is not None:
            self.on_step(report, len(plan.batch), len(self.engine.slots.slots))
        with self._cond:
            try:
                self.policy.update(plan, report)
            finally:
                self._hand_back()
