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
from app.engine.sequence import Phase, SequenceGeneration

log = logging.getLogger("livetrans.scheduler")

T = TypeVar("T")

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


class StepScheduler:
    """Runs generations of many callers in shared steps, on its own thread."""

    def __init__(self, engine: Engine, config: SchedulerConfig | None = None,
                 on_step: Callable[[StepReport, int, int], None] | None = None,
                 on_admit: Callable[[Ticket, float], None] | None = None) -> None:
        self.engine = engine
        self.config = config or SchedulerConfig()
        self.on_step = on_step  # (report, sequences running, sequences in the context)
        self.on_admit = on_admit  # (ticket, seconds it waited)
        self.waiting: list[Ticket] = []
        self.active: list[Ticket] = []
        self.preemptions = 0
        self.steps = 0
        self.busy_since: float | None = None
        self.finished_by_priority: Counter[str] = Counter()
        self._exclusive: list[tuple[Callable[[], object], threading.Event, list]] = []
        self._served: dict[str, int] = {}  # client -> admission counter when last served
        self._admissions = 0
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
            if self._stopping:
                gen.fail("cancelled")
                ticket.done.set()
                return ticket
            self.waiting.append(ticket)
            self._cond.notify()
        return ticket

    def run(self, ticket: Ticket) -> GenerationResult:
        """Block until ``ticket`` is finished; its result (or its error, raised)."""
        ticket.done.wait()
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
            if self._stopping:
                raise RuntimeError("the scheduler has stopped")
            self._exclusive.append((fn, done, box))
            self._cond.notify()
        done.wait()
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

    def stop(self, timeout: float = 5.0) -> None:
        """Stop stepping; whatever still waits or runs ends as cancelled."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout)

    # -- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not (self.waiting or self.active or self._exclusive or self._stopping):
                    self.busy_since = None
                    self._cond.wait()
                if self._stopping:
                    for t in self.waiting + self.active:
                        self._finish(t, reason="cancelled")
                    self.waiting.clear()
                    self.active.clear()
                    for _fn, done, box in self._exclusive:
                        box[:] = [None, RuntimeError("the scheduler has stopped")]
                        done.set()
                    return
                if self.busy_since is None:
                    self.busy_since = time.perf_counter()
                self._drop_cancelled()
                exclusive = self._exclusive.pop(0) if self._exclusive and not self.active \
                    else None
                if exclusive is None and not self._exclusive:
                    self._admit()
                batch = sorted(self.active, key=lambda t: (
                    t.rank, t.gen.phase is not Phase.DECODE, t.order))
                batch = self._shape(batch)
            if exclusive is not None:
                self._run_one_exclusive(*exclusive)
                continue
            if not batch:
                continue
            try:
                report = self.engine.step([t.gen for t in batch], self.config.step_tokens,
                                          self.config.prefill_chunk)
            except Exception as exc:  # noqa: BLE001 - one failed step fails its sequences
                log.exception("a step failed; %d generations end with an error", len(batch))
                with self._cond:
                    self.engine.slots.clear()
                    for t in batch:
                        t.error = exc
                        t.gen.fail("error")
                        self._retire(t)
                    for t in list(self.active):  # their KV went too: they re-prefill
                        self._preempt(t)
                continue
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
            t.gen.fail("cancelled")
            self._retire(t)

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
            kv = slots.acquire(ticket.gen.target)
            if kv is None:  # pragma: no cover - a free slot was just counted or made
                return
            self.waiting.pop(0)
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
        self.active.remove(victim)
        kv = victim.gen.detach()
        if kv is not None:
            self.engine.slots.release(kv)
        victim.gen.result.preemptions += 1
        victim.enqueued_at = time.perf_counter()
        self.preemptions += 1
        self.waiting.append(victim)

    def _retire(self, ticket: Ticket) -> None:
        if ticket in self.active:
            self.active.remove(ticket)
        kv = ticket.gen.kv
        if kv is not None:
            self.engine.slots.release(kv)
        self._finish(ticket, reason=None)

    def _finish(self, ticket: Ticket, reason: str | None) -> None:
        if reason is not None:
            ticket.gen.fail(reason)
        self.engine.finished(ticket.gen)
        self.finished_by_priority[PRIORITY_NAMES.get(ticket.priority, "other")] += 1
        ticket.done.set()
