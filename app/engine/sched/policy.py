"""The step scheduler's policy: who runs the next forward pass, and what happens after it.

A pure object in the shape of vLLM's v1 scheduler (``schedule()`` returning a
``SchedulerOutput``, ``update_from_output()``): ``add`` files a generation, ``plan`` decides
the next pass (a ``StepPlan``) from the queue and the KV slots, ``update`` takes the pass's
outcome back (a report, or the exception it raised). No thread, no lock, no sleeping: the
driver (``app.engine.sched.driver``) holds the lock, calls the engine between ``plan`` and
``update`` and wakes the waiters of the tickets handed back (``take_finished``). The tests
drive it with a fake engine and no model (``tests/app/engine/test_policy.py``).

Each ``plan`` (1) drops generations whose client went away or were superseded, (2) admits
waiting generations into free sequences, preempting when a more urgent one waits, (3)
shapes the pass: who takes part, in which order, with how many drafter proposals.

Order among waiting generations: rank first (finals before everything else), then fair
share: the client with the fewest running sequences, then the one served least recently,
then arrival order. So one client's flood of finals or long requests cannot starve another
client's final: the other client's final is next in line the moment it arrives.

Preemption (vLLM's "recompute" kind): when no sequence is free, a waiting generation takes
the place of a running one that is less urgent (a partial or request for a final), or, at
equal rank, of a client holding two or more sequences when its own client holds none. The
preempted generation keeps its output and re-prefills ``prompt + output`` when it gets a
sequence again; its tokens do not change (greedy decoding is a function of the tokens).

Failures tied to one generation (admitting it: copying a prefix, cutting its sequence's
cache back, which a recurrent model refuses, or its admission callback; handing it back)
fail that generation only, with a ``GenerationFailedError`` naming the step, and its
sequence's cache is forgotten. A failed pass (``update`` with an error) fails the
generations in it; the KV cache is cleared and the others re-prefill.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.engine import StepReport
from app.engine.jobs import (  # noqa: F401 - re-exported (app.engine.scheduler)
    PRIORITY_FINAL,
    PRIORITY_NAMES,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
)
from app.engine.kv_slots import KvSlots, SeqKV
from app.engine.sched.errors import job_error
from app.engine.sequence import Phase, SequenceGeneration

log = logging.getLogger("livetrans.scheduler")

# Waits before each restart of the driver's loop after an unexpected exception (the same
# steps as app.supervision.BACKOFF_S, which the engine layer cannot import).
RESTART_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)

# Job priorities (``app.engine.jobs``): finals rank first; partials and HTTP requests share
# one rank (fair share decides among them), but keep their own label for metrics and
# shutdown.

_UNLIMITED = 1 << 30  # no cap on a sequence's drafter proposals


def rank_of(priority: int) -> int:
    return 0 if priority <= PRIORITY_FINAL else 1


@dataclass(eq=False)
class Ticket:
    """One generation's place in the scheduler. The policy reads ``cancel`` and never
    touches ``done`` or ``on_done``: the driver sets the one and calls the other (on its
    thread) when the policy hands the ticket back. ``on_done`` is how an awaiting job
    learns it: the engine worker resolves the job's future on its event loop from it."""

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
    on_done: Callable[[Ticket], None] | None = None
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
    # cap)
    crowded_proposals: int | None = None
    # SSBD draft tokens a sequence verifies per pass when the pass carries several
    # sequences (None: the whole draft at once); the rest follows part by part
    crowded_draft: int | None = None
    # SSBD draft tokens a draft verified without bias (beta 0: every final by default)
    # verifies per pass (None: the whole draft at once). A final's draft is the last
    # partial, written under the partials' bias, and greedy decoding leaves it early:
    # measured on FLORES and ACL dev (en-de), a final accepted a median 1-2 of ~20 draft
    # tokens (a beta-0 partial 4 of 16), and each rejected row costs about a quarter of a
    # pass on a CPU. Parts end at the first mismatch; a draft that holds goes
    # on part by part, accepted exactly as far as at once (``SequenceGeneration``).
    final_draft: int | None = 4
    # What else a step carries while a final runs (a final's caption waits for every
    # step it shares): "shared" everything as usual; "lead" other sequences' next token
    # only (no proposals, no prompt chunks); "alone" nothing (they pause, keeping their KV).
    final_steps: str = "lead"
    # (the driver's) waits before each restart after an unexpected exception in the loop;
    # one failure more than it has steps, with no round completed in between, breaks the
    # scheduler
    restart_backoff_s: tuple[float, ...] = RESTART_BACKOFF_S


@dataclass
class StepPlan:
    """The next forward pass: ``batch`` in priority order (each generation's
    ``proposal_cap`` set), at most ``budget`` rows, ``chunk`` prompt rows a sequence; and
    what planning it did to the queue."""

    budget: int
    chunk: int
    batch: list[Ticket] = field(default_factory=list)
    admitted: list[Ticket] = field(default_factory=list)
    preempted: list[Ticket] = field(default_factory=list)
    cancelled: list[Ticket] = field(default_factory=list)
    failed: list[Ticket] = field(default_factory=list)  # their admission failed

    @property
    def gens(self) -> list[SequenceGeneration]:
        return [t.gen for t in self.batch]


class PolicyEngine(Protocol):
    """What the policy needs of the engine (``app.engine.engine.Engine`` is one)."""

    slots: KvSlots

    def attach(self, gen: SequenceGeneration, kv: SeqKV) -> None: ...

    def finished(self, gen: SequenceGeneration) -> None: ...


class StepPolicy:
    """The queue, the running generations and the rules between them (module docstring).
    Not thread-safe: its one caller (the driver) holds a lock around every call."""

    def __init__(self, engine: PolicyEngine, config: SchedulerConfig | None = None,
                 on_admit: Callable[[Ticket, float], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.engine = engine
        self.config = config or SchedulerConfig()
        self.on_admit = on_admit  # (ticket, seconds it waited)
        self.clock = clock
        self.waiting: list[Ticket] = []
        self.active: list[Ticket] = []
        self.preemptions = 0
        self.finished_by_priority: Counter[str] = Counter()
        self._served: dict[str, int] = {}  # client -> admission counter when last served
        self._admissions = 0
        self._handed_back: list[Ticket] = []

    # -- the queue -------------------------------------------------------------------------
    def add(self, ticket: Ticket) -> None:
        self.waiting.append(ticket)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.active)

    def oldest_wait_s(self, rank: int = 1) -> float:
        """How long the longest-waiting generation of ``rank`` has waited (0 if none)."""
        now = self.clock()
        return max((now - t.enqueued_at for t in self.waiting if t.rank == rank),
                   default=0.0)

    def take_finished(self) -> list[Ticket]:
        """The tickets handed back since the last call (finished, cancelled or failed: each
        one's result or ``error`` is final); the driver wakes their waiters."""
        out, self._handed_back = self._handed_back, []
        return out

    # -- one pass --------------------------------------------------------------------------
    def plan(self) -> StepPlan:
        """The next pass: drop the cancelled, admit the waiting, shape the batch."""
        plan = StepPlan(budget=self.config.step_tokens, chunk=self.config.prefill_chunk)
        self._drop_cancelled(plan)
        self._admit(plan)
        plan.batch = self._shape(sorted(self.active, key=lambda t: (
            t.rank, t.gen.phase is not Phase.DECODE, t.order)))
        return plan

    def update(self, plan: StepPlan, report: StepReport | None = None,
               error: BaseException | None = None) -> None:
        """The outcome of ``plan``'s pass: ``error`` fails its generations (the KV cache is
        cleared, every other running one re-prefills); otherwise what finished is retired."""
        if error is not None:
            for t in plan.batch:
                t.error = error
                self._retire(t, reason="error")
            self.engine.slots.clear()
            for t in list(self.active):  # their KV went too: they re-prefill
                self._preempt(t)
            return
        for t in list(self.active):
            if t.gen.done:
                self._retire(t)

    # -- resets (the driver's supervisor) --------------------------------------------------
    def reset(self) -> None:
        """Back to a known state after an unexpected exception: finished generations are
        handed back, running ones requeued (they re-prefill, as after a preemption), every
        sequence freed and its cache forgotten (a failure may have left a cache and its
        mirror apart; correctness never depends on the cache)."""
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

    def abort(self, reason: str,
              error: Callable[[], BaseException] | None = None) -> None:
        """Hand back every waiting and running generation as ``reason`` ("cancelled" when
        the scheduler stops, "error" when it breaks, each without an error yet getting a
        fresh ``error()``)."""
        tickets = self.waiting + self.active
        self.waiting.clear()
        self.active.clear()
        for t in tickets:
            if error is not None and t.error is None:
                t.error = error()
            self._finish(t, reason=reason)

    # -- planning --------------------------------------------------------------------------
    def _drop_cancelled(self, plan: StepPlan) -> None:
        for t in [t for t in self.waiting if t.cancelled]:
            self.waiting.remove(t)
            plan.cancelled.append(t)
            self._finish(t, reason="cancelled")
        # running ones leave at this pass: their next plan() sees the cancel flag
        for t in [t for t in self.active if t.cancel.is_set() and not t.gen.done]:
            plan.cancelled.append(t)
            self._retire(t, reason="cancelled")

    def _running_of(self, client: str) -> int:
        return sum(t.client == client for t in self.active)

    def _admit(self, plan: StepPlan) -> None:
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
                plan.preempted.append(victim)
            kv = None
            try:
                kv = slots.acquire(ticket.gen.target, one_off=ticket.gen.req.one_off)
                if kv is None:  # pragma: no cover - a free slot was just counted or made
                    return
                self.waiting.pop(0)
                self._start(ticket, kv)
                plan.admitted.append(ticket)
            except Exception as exc:  # noqa: BLE001 - this generation's failure, no other's
                plan.failed.append(ticket)
                self._admission_failed(ticket, kv, exc)

    def _start(self, ticket: Ticket, kv: SeqKV) -> None:
        """``ticket`` runs on ``kv`` from the next pass on."""
        self.engine.attach(ticket.gen, kv)
        now = self.clock()
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
        clean. Should forgetting fail too, the exception leaves ``plan`` (the driver
        restarts its loop and calls ``reset``)."""
        log.error("admitting a generation failed; it ends with an error", exc_info=exc)
        for queue in (self.waiting, self.active):
            if ticket in queue:
                queue.remove(ticket)
        ticket.error = job_error("admitting the generation to a sequence", exc)
        self._finish(ticket, reason="error")
        slots = self.engine.slots
        if kv is not None:
            slots.release(kv)
        for seq in [kv] if kv is not None else [s for s in slots.slots if not s.busy]:
            seq.forget()

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

    def _shape(self, batch: Sequence[Ticket]) -> list[Ticket]:
        """Who takes part in the next pass, and with how many drafter proposals.

        Each logits row costs about as much as a whole token of a small model on a CPU,
        so rows are what a pass is made of: with several sequences decoding, proposals
        may be capped (``crowded_proposals``), with several sequences in the pass the SSBD
        draft of a partial or request is verified in parts (``crowded_draft``: the rows past
        a draft's first mismatch are thrown away, and in a crowded pass they cost what
        useful rows do), a draft verified without bias always (``final_draft``), and
        while a final runs the others give way as ``final_steps`` says.
        """
        batch = list(batch)
        decoding = sum(t.gen.phase is Phase.DECODE for t in batch)
        crowded = self.config.crowded_proposals
        for t in batch:
            t.gen.proposal_cap = crowded if crowded is not None and decoding > 1 \
                else _UNLIMITED
            t.gen.draft_cap = self._draft_cap(t, shared=len(batch) > 1)
        if not batch or batch[0].rank != 0 or self.config.final_steps == "shared":
            return batch
        finals = [t for t in batch if t.rank == 0]
        if self.config.final_steps == "alone":
            return finals
        others = [t for t in batch if t.rank != 0 and t.gen.phase is Phase.DECODE]
        for t in others:
            t.gen.proposal_cap = t.gen.draft_cap = 0
        return finals + others

    def _draft_cap(self, t: Ticket, shared: bool) -> int:
        """How many SSBD draft tokens ``t`` verifies in its next pass.

        A draft verified without bias (beta 0: every final by default, a partial or
        request at beta 0) goes in parts of ``final_draft``, alone or not: greedy decoding
        mostly leaves it within the first few tokens (see ``SchedulerConfig``). A biased
        final verifies its whole draft at once (it keeps most of it, and each part would
        cost it a pass more); biased partials and requests in a shared pass go in parts
        of ``crowded_draft``.
        """
        caps = []
        if self.config.final_draft is not None and getattr(t.gen.req, "beta", 0.0) == 0.0:
            caps.append(self.config.final_draft)
        if self.config.crowded_draft is not None and shared and t.rank != 0:
            caps.append(self.config.crowded_draft)
        return min(caps, default=_UNLIMITED)

    # -- moving tickets --------------------------------------------------------------------
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
        ticket.enqueued_at = self.clock()
        self.waiting.append(ticket)

    def _retire(self, ticket: Ticket, reason: str | None = None) -> None:
        if ticket in self.active:
            self.active.remove(ticket)
        kv = ticket.gen.kv
        if kv is not None:
            self.engine.slots.release(kv)
        self._finish(ticket, reason)

    def _finish(self, ticket: Ticket, reason: str | None) -> None:
        """Hand ``ticket`` back (``take_finished``), whatever fails here (a client's text
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
                ticket.error = job_error("handing the generation back", exc)
        finally:
            self._handed_back.append(ticket)
