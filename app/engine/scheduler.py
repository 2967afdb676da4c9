"""The step scheduler: one thread, one forward pass per step, every runnable sequence in it.

Each step the scheduler (1) drops generations whose client went away or were superseded,
(2) admits waiting generations into free sequences, preempting when a more urgent one waits,
(3) runs ``Engine.step`` over all admitted generations, (4) hands finished ones back.

Order among waiting generations: rank first (finals before everything else), then fair
share: the client with the fewest running sequences, then the one served least recently,
then arrival order. So one client's flood of finals or long requests cannot starve another
client's final: the other client's final is next in line the moment it arrives.

Preemption (vLLM's "recompute" kind): when no sequence is free, a waiting generation takes
the place of a running one that is less urgent (a partial or request for a final), or, at
equal rank, of a client holding two or more sequences when its own client holds none. The
preempted generation keeps its output and re-prefills ``prompt + output`` when it gets a
sequence again; its tokens do not change (greedy decoding is a function of the tokens).

Failures. The thread runs its loop under a supervisor, so that no exception ends it
silently while every job waits forever. A failed forward pass fails the generations in it
(the KV cache is cleared; the others re-prefill). A failure tied to one generation (admitting
it: copying a prefix, cutting its sequence's cache back, which a recurrent model refuses;
handing it back) fails that generation only, with a ``GenerationFailedError`` naming the
step, and its sequence's cache is forgotten. Any other exception is logged once with its
traceback, counted (``on_restart``) and the loop starts again after a backoff
(``restart_backoff_s``) from a known state: running generations requeued, every cache
forgotten. When the loop fails once more than the backoff has steps without completing a
round in between, or the thread ends, the scheduler is broken: ``broken`` says why, and
every waiting, running and later job ends with ``SchedulerBrokenError`` (HTTP 503).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from app.engine.engine import Engine, StepReport
from app.engine.generation import GenerationResult
from app.engine.kv_slots import SeqKV
from app.engine.sequence import Phase, SequenceGeneration

log = logging.getLogger("livetrans.scheduler")

T = TypeVar("T")

# Waits before each restart of the loop after an unexpected exception (the same steps as
# app.supervision.BACKOFF_S, which the engine layer cannot import).
RESTART_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)
_REASON_CHARS = 300  # a failure's message in ``broken`` (one line for /health)


class GenerationFailedError(RuntimeError):
    """One generation could not be admitted or handed back; its job fails, no other."""


class SchedulerBrokenError(RuntimeError):
    """The scheduler thread cannot continue: every waiting and later job ends with this."""


_LOGGED = "__livetrans_logged__"


def mark_logged(exc: BaseException) -> None:
    """Remember that ``exc``'s traceback is in the log (job threads and the HTTP layer then
    skip it: one failure, one traceback)."""
    try:
        setattr(exc, _LOGGED, True)
    except AttributeError:  # an exception type without a __dict__
        pass


def was_logged(exc: BaseException) -> bool:
    return bool(getattr(exc, _LOGGED, False))


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, bounded (for ``broken`` and error messages)."""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."
# Job priorities. Finals rank first; partials and HTTP requests share one rank (fair share
# decides among them), but keep their own label for metrics and shutdown.
PRIORITY_FINAL = 0
PRIORITY_REQUEST = 1
PRIORITY_PARTIAL = 2
PRIORITY_NAMES = {PRIORITY_FINAL: "final", PRIORITY_REQUEST: "request",
                  PRIORITY_PARTIAL: "partial"}


def rank_of(priority: int) -> int:
    return 0 if priority <= PRIORITY_FINAL else 1


@dataclass(eq=False)
class Ticket:
    """One generation's place in the scheduler."""

    gen: SequenceGeneration
    priority: int
    client: str
    order: int
    cancel: threading.Event
    on_admit: Callable[[], None] | None = None
    enqueued_at: float = field(default_factory=time.perf_counter)
    admitted_at: float | None = None
    ever_admitted: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    @property
    def rank(self) -> int:
        return rank_of(self.priority)

    @property
    def cancelled(self) -> bool:
        req_cancel = self.gen.req.cancel
        return self.cancel.is_set() or (req_cancel is not None and req_cancel.is_set())


@dataclass
class SchedulerConfig:
    step_tokens: int = 512  # rows per step (prompt chunks fill what decoding leaves)
    prefill_chunk: int = 256  # prompt rows of one sequence per step
    # drafter proposals per sequence when several sequences decode in one step (None: no
    # cap); the SSBD draft is never capped (it rides on the prompt's pass)
    crowded_proposals: int | None = None
    # What else a step carries while a final runs (a final's caption waits for every
    # step it shares): "shared" everything as usual; "lead" other sequences' next token
    # only (no proposals, no prompt chunks); "alone" nothing (they pause, keeping their KV).
    final_steps: str = "lead"
    # waits before each restart after an unexpected exception in the loop; one failure
    # more than it has steps, with no round completed in between, breaks the scheduler
    restart_backoff_s: tuple[float, ...] = RESTART_BACKOFF_S


class StepScheduler:
    """Runs generations of many callers in shared steps, on its own thread."""

    def __init__(self, engine: Engine, config: SchedulerConfig | None = None,
                 on_step: Callable[[StepReport, int, int], None] | None = None,
                 on_admit: Callable[[Ticket, float], None] | None = None,
                 on_restart: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.config = config or SchedulerConfig()
        self.on_step = on_step  # (report, sequences running, sequences in the context)
        self.on_admit = on_admit  # (ticket, seconds it waited)
        self.on_restart = on_restart  # ("scheduler"): the loop restarted, for metrics
        self.waiting: list[Ticket] = []
        self.active: list[Ticket] = []
        self.preemptions = 0
        self.steps = 0
        self.restarts = 0
        self.busy_since: float | None = None
        self.finished_by_priority: Counter[str] = Counter()
        self._exclusive: list[tuple[Callable[[], object], threading.Event, list]] = []
        self._served: dict[str, int] = {}  # client -> admission counter when last served
        self._admissions = 0
        self._rounds = 0  # loop rounds completed (a step or an exclusive call)
        self._broken: str | None = None
        self._cond = threading.Condition()  # lock order: app/engine/__init__.py
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="step-scheduler", daemon=True)
        self._thread.start()

    # -- callers ---------------------------------------------------------------------------
    def submit(self, gen: SequenceGeneration, *, priority: int, client: str, order: int,
               cancel: threading.Event, on_admit: Callable[[], None] | None = None) -> Ticket:
        ticket = Ticket(gen=gen, priority=priority, client=client, order=order, cancel=cancel,
                        on_admit=on_admit)
        with self._cond:
            if self._stopping or self._broken is not None:
                if self._broken is not None:
                    ticket.error = self._broken_error()
                gen.fail("cancelled" if ticket.error is None else "error")
                ticket.done.set()
                return ticket
            self.waiting.append(ticket)
            self._cond.notify()
        return ticket

    def run(self, ticket: Ticket) -> GenerationResult:
        """Block until ``ticket`` is finished; its result (or its error, raised)."""
        self._wait(ticket.done)
        if ticket.error is not None:
            raise ticket.error
        return ticket.gen.result

    def run_exclusive(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the scheduler thread once no sequence is running, with nothing else
        admitted meanwhile (for work that needs the raw engine to itself: sequence-0
        primitives in benchmarks and tests, maintenance). Blocks until it has run."""
        done = threading.Event()
        box: list = []
        with self._cond:
            if self._broken is not None:
                raise self._broken_error()
            if self._stopping:
                raise RuntimeError("the scheduler has stopped")
            self._exclusive.append((fn, done, box))
            self._cond.notify()
        self._wait(done)
        value, error = box
        if error is not None:
            raise error
        return value

    def oldest_wait_s(self, rank: int = 1) -> float:
        """How long the longest-waiting generation of ``rank`` has waited (0 if none)."""
        now = time.perf_counter()
        with self._cond:
            waits = [now - t.enqueued_at for t in self.waiting if t.rank == rank]
        return max(waits, default=0.0)

    @property
    def depth(self) -> int:
        return len(self.waiting)

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
        """Back to a known state after an unexpected exception: finished generations are
        handed back, running ones requeued (they re-prefill, as after a preemption), every
        sequence freed and its cache forgotten (a failure may have left a cache and its
        mirror apart; correctness never depends on the cache)."""
        with self._cond:
            for t in list(self.active):
                if t.gen.done:
                    self._retire(t)
                else:
                    self._requeue(t)
            slots = self.engine.slots
            for kv in slots.slots:
                if kv.busy:
                    slots.release(kv)
            slots.clear()

    def _break(self, reason: str) -> None:
        """The thread cannot continue: say why from now on (``broken``, /health) and end
        every waiting, running and exclusive job with an error naming it."""
        with self._cond:
            if self._broken is None:
                self._broken = reason
            tickets = self.waiting + self.active
            self.waiting.clear()
            self.active.clear()
            for t in tickets:
                if t.error is None:
                    t.error = self._broken_error()
                self._finish(t, reason="error")
            for _fn, done, box in self._exclusive:
                box[:] = [None, self._broken_error()]
                done.set()
            self._exclusive.clear()
            self.busy_since = None

    def _broken_error(self) -> SchedulerBrokenError:
        """A fresh error per job (one exception object raised on many threads would share
        one traceback), marked as logged: the cause was logged when it happened."""
        exc = SchedulerBrokenError(self._broken or "the scheduler thread is not running")
        mark_logged(exc)
        return exc

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self.waiting or self.active or self._exclusive or self._stopping):
                    self.busy_since = None
                    self._cond.wait()
                if self._stopping:
                    self._cancel_everything()
                    return
                if self.busy_since is None:
                    self.busy_since = time.perf_counter()
                self._drop_cancelled()
                exclusive = self._exclusive.pop(0) if self._exclusive and not self.active \
                    else None
                batch: list[Ticket] = []
                if exclusive is None:
                    if not self._exclusive:  # an exclusive call waits: admit nothing more
                        self._admit()
                    batch = self._shape(sorted(self.active, key=lambda t: (
                        t.rank, t.gen.phase is not Phase.DECODE, t.order)))
            if exclusive is not None:
                self._run_one_exclusive(*exclusive)
            elif batch:
                self._step(batch)
            else:
                continue
            self._rounds += 1

    def _cancel_everything(self) -> None:
        for t in self.waiting + self.active:
            self._finish(t, reason="cancelled")
        self.waiting.clear()
        self.active.clear()
        for _fn, done, box in self._exclusive:
            box[:] = [None, RuntimeError("the scheduler has stopped")]
            done.set()
        self._exclusive.clear()

    def _step(self, batch: list[Ticket]) -> None:
        """One forward pass over ``batch``, then hand back what finished."""
        try:
            report = self.engine.step([t.gen for t in batch], self.config.step_tokens,
                                      self.config.prefill_chunk)
        except Exception as exc:  # noqa: BLE001 - one failed step fails its sequences
            log.exception("a step failed; %d generations end with an error", len(batch))
            mark_logged(exc)
            with self._cond:
                for t in batch:
                    t.error = exc
                    self._retire(t, reason="error")
                self.engine.slots.clear()
                for t in list(self.active):  # their KV went too: they re-prefill
                    self._preempt(t)
            return
        self.steps += 1
        if self.on_step is not None:
            self.on_step(report, len(batch), len(self.engine.slots.slots))
        with self._cond:
            for t in list(self.active):
                if t.gen.done:
                    self._retire(t)

    def _shape(self, batch: list[Ticket]) -> list[Ticket]:
        """Who takes part in the next step, and with how many drafter proposals.

        Each logits row costs about as much as a whole token of a small model on a CPU,
        so rows are what a step is made of: with several sequences decoding, proposals
        may be capped (``crowded_proposals``), and while a final runs the others give way
        as ``final_steps`` says.
        """
        unlimited = 1 << 30
        decoding = sum(t.gen.phase is Phase.DECODE for t in batch)
        crowded = self.config.crowded_proposals
        for t in batch:
            t.gen.proposal_cap = crowded if crowded is not None and decoding > 1 \
                else unlimited
        if not batch or batch[0].rank != 0 or self.config.final_steps == "shared":
            return batch
        finals = [t for t in batch if t.rank == 0]
        if self.config.final_steps == "alone":
            return finals
        others = [t for t in batch if t.rank != 0 and t.gen.phase is Phase.DECODE]
        for t in others:
            t.gen.proposal_cap = 0
        return finals + others

    @staticmethod
    def _run_one_exclusive(fn: Callable[[], object], done: threading.Event,
                           box: list) -> None:
        try:
            box[:] = [fn(), None]
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box[:] = [None, exc]
        done.set()

    def _drop_cancelled(self) -> None:
        for t in [t for t in self.waiting if t.cancelled]:
            self.waiting.remove(t)
            self._finish(t, reason="cancelled")
        # running ones leave at this step: their next plan() sees the cancel flag
        for t in [t for t in self.active if t.cancel.is_set() and not t.gen.done]:
            self._retire(t, reason="cancelled")

    def _running_of(self, client: str) -> int:
        return sum(t.client == client for t in self.active)

    def _admit(self) -> None:
        slots = self.engine.slots
        while self.waiting:
            self.waiting.sort(key=lambda t: (t.rank, self._running_of(t.client),
                                             self._served.get(t.client, -1), t.order))
            ticket = self.waiting[0]
            if slots.free == 0:
                victim = self._victim_for(ticket)
                if victim is None:
                    return
                self._preempt(victim)
            kv = None
            try:
                kv = slots.acquire(ticket.gen.target)
                if kv is None:  # pragma: no cover - a free slot was just counted or made
                    return
                self.waiting.pop(0)
                self._start(ticket, kv)
            except Exception as exc:  # noqa: BLE001 - this generation's failure, no other's
                self._admission_failed(ticket, kv, exc)

    def _start(self, ticket: Ticket, kv: SeqKV) -> None:
        """``ticket`` runs on ``kv`` from the next step on."""
        self.engine.attach(ticket.gen, kv)
        now = time.perf_counter()
        waited = now - ticket.enqueued_at
        ticket.gen.result.queue_ms += waited * 1000
        ticket.admitted_at = now
        self._admissions += 1
        self._served[ticket.client] = self._admissions
        self.active.append(ticket)
        if not ticket.ever_admitted:
            ticket.ever_admitted = True
            if ticket.on_admit is not None:
                ticket.on_admit()
        if self.on_admit is not None:
            self.on_admit(ticket, waited)

    def _admission_failed(self, ticket: Ticket, kv: SeqKV | None, exc: Exception) -> None:
        """Fail ``ticket`` alone, with an error naming the step, and forget the cache of the
        sequence it was given (or, when taking one failed, of every free one: copying a
        prefix may have emptied the one it chose), so the next generation there starts
        clean. Should forgetting fail too, the loop restarts (``_recover``)."""
        log.error("admitting a generation failed; it ends with an error", exc_info=exc)
        for queue in (self.waiting, self.active):
            if ticket in queue:
                queue.remove(ticket)
        ticket.error = self._job_error("admitting the generation to a sequence", exc)
        self._finish(ticket, reason="error")
        slots = self.engine.slots
        if kv is not None:
            slots.release(kv)
        for seq in [kv] if kv is not None else [s for s in slots.slots if not s.busy]:
            seq.forget()

    @staticmethod
    def _job_error(step: str, exc: BaseException) -> GenerationFailedError:
        """What the job of a generation that failed in ``step`` raises (already logged)."""
        error = GenerationFailedError(f"{step} failed: {describe(exc)}")
        error.__cause__ = exc
        mark_logged(error)
        return error

    def _victim_for(self, ticket: Ticket) -> Ticket | None:
        """The running generation ``ticket`` may take the place of, if any."""
        mine = self._running_of(ticket.client)
        candidates = [
            t for t in self.active
            if not t.gen.done and (t.rank > ticket.rank or (
                t.rank == ticket.rank and mine == 0 and self._running_of(t.client) >= 2))
        ]
        if not candidates:
            return None
        # the least urgent, from the client holding most, the most recently admitted
        return max(candidates, key=lambda t: (t.rank, self._running_of(t.client),
                                              t.admitted_at or 0.0))

    def _preempt(self, victim: Ticket) -> None:
        self._requeue(victim)
        victim.gen.result.preemptions += 1
        self.preemptions += 1

    def _requeue(self, ticket: Ticket) -> None:
        """Take ``ticket``'s sequence away: it waits again, and re-prefills what it lost."""
        self.active.remove(ticket)
        kv = ticket.gen.detach()
        if kv is not None:
            self.engine.slots.release(kv)
        ticket.enqueued_at = time.perf_counter()
        self.waiting.append(ticket)

    def _retire(self, ticket: Ticket, reason: str | None = None) -> None:
        if ticket in self.active:
            self.active.remove(ticket)
        kv = ticket.gen.kv
        if kv is not None:
            self.engine.slots.release(kv)
        self._finish(ticket, reason)

    def _finish(self, ticket: Ticket, reason: str | None) -> None:
        """Hand ``ticket`` back. Its waiter is woken whatever fails here (a client's text
        callback, a counter); such a failure fails this generation only."""
        try:
            if reason is not None:
                ticket.gen.fail(reason)
            self.engine.finished(ticket.gen)
            self.finished_by_priority[PRIORITY_NAMES.get(ticket.priority, "other")] += 1
        except Exception as exc:  # noqa: BLE001 - this generation's failure, no other's
            log.error("handing a generation back failed; it ends with an error",
                      exc_info=exc)
            if ticket.error is None:
                ticket.error = self._job_error("handing the generation back", exc)
        finally:
            ticket.done.set()
