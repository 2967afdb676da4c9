"""The scheduler's policy alone: no thread, no model. A fake engine (real ``KvSlots`` over a
runtime that computes nothing) and fake sequences that advance one token a pass; each test
drives ``plan`` -> (fake) pass -> ``update`` by hand and looks at the plans, the queue, the
tickets handed back and the sequences."""

from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace

import pytest

from app.engine.kv_slots import KvSlots, SeqKV
from app.engine.scheduler import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    GenerationFailedError,
    SchedulerConfig,
    StepPlan,
    StepPolicy,
    Ticket,
)
from app.engine.sequence import Phase


class FakeRuntime:
    """What ``KvSlots`` calls: cache edits that do nothing but count."""

    def __init__(self, n_seq: int) -> None:
        self.n_seq = n_seq
        self.clears = 0
        self.truncations: list[tuple[int, int]] = []

    def truncate(self, pos: int, seq: int = 0) -> None:
        self.truncations.append((pos, seq))

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        pass

    def clear(self) -> None:
        self.clears += 1


class FakeGen:
    """A generation: one pass prefills its prompt, each further pass emits one token, and
    it is done after ``tokens`` tokens."""

    def __init__(self, prompt: list[int], tokens: int = 2,
                 req_cancel: threading.Event | None = None) -> None:
        self.req = SimpleNamespace(cancel=req_cancel, beta=0.2,  # partials' default bias
                                   one_off=False)
        self.result = SimpleNamespace(queue_ms=0.0, preemptions=0, finish_reason=None)
        self.prompt, self.output, self.tokens = list(prompt), [], tokens
        self.kv: SeqKV | None = None
        self.phase = Phase.PREFILL
        self.proposal_cap: int | None = None
        self.draft_cap: int | None = None
        self.passes = 0

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    @property
    def target(self) -> list[int]:
        return self.prompt + self.output

    def attach(self, kv: SeqKV) -> None:
        self.kv, self.phase = kv, Phase.PREFILL  # a resumed one re-prefills

    def detach(self) -> SeqKV | None:
        kv, self.kv = self.kv, None
        return kv

    def advance(self) -> None:
        self.passes += 1
        if self.phase is Phase.PREFILL:
            self.phase = Phase.DECODE
            self.kv.cached = list(self.target)
            return
        self.output.append(7)
        self.kv.cached.append(7)
        if len(self.output) >= self.tokens:
            self.result.finish_reason = "length"
            self.phase = Phase.DONE

    def fail(self, reason: str = "cancelled") -> None:
        if not self.done:
            self.result.finish_reason = reason
            self.phase = Phase.DONE


class FakeEngine:
    def __init__(self, n_seq: int = 1) -> None:
        self.rt = FakeRuntime(n_seq)
        self.slots = KvSlots(self.rt)  # type: ignore[arg-type]
        self.finish_reasons: Counter[str] = Counter()

    def attach(self, gen: FakeGen, kv: SeqKV) -> None:
        gen.attach(kv)

    def finished(self, gen: FakeGen) -> None:
        self.finish_reasons[gen.result.finish_reason] += 1

    def step(self, plan: StepPlan) -> None:
        for gen in plan.gens:
            gen.advance()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _policy(n_seq: int = 1, **config) -> StepPolicy:  # noqa: ANN003
    return StepPolicy(FakeEngine(n_seq), SchedulerConfig(**config),  # type: ignore[arg-type]
                      clock=Clock())


_orders = iter(range(1_000_000))


def _add(policy: StepPolicy, priority: int = PRIORITY_REQUEST, client: str = "a",
         prompt: list[int] | None = None, tokens: int = 2,
         on_admit=None) -> Ticket:  # noqa: ANN001
    ticket = Ticket(gen=FakeGen(prompt or [1, 2, 3], tokens),  # type: ignore[arg-type]
                    priority=priority, client=client, order=next(_orders),
                    cancel=threading.Event(), on_admit=on_admit,
                    enqueued_at=policy.clock())
    policy.add(ticket)
    return ticket


def _pass(policy: StepPolicy) -> StepPlan:
    plan = policy.plan()
    policy.engine.step(plan)
    policy.update(plan)
    return plan


def _run_all(policy: StepPolicy, limit: int = 100) -> list[Ticket]:
    """Passes until nothing waits or runs; the tickets in the order they were admitted."""
    admitted: list[Ticket] = []
    for _ in range(limit):
        if not policy.has_work:
            return admitted
        admitted += _pass(policy).admitted
    raise AssertionError("the policy never ran out of work")


def test_admission_order_finals_first_then_arrival():
    policy = _policy(n_seq=1)
    partial = _add(policy, PRIORITY_PARTIAL, client="a")
    request = _add(policy, PRIORITY_REQUEST, client="a")
    final = _add(policy, PRIORITY_FINAL, client="a")
    admitted = _run_all(policy)
    assert admitted == [final, partial, request]
    handed_back = policy.take_finished()
    assert set(handed_back) == {final, partial, request}
    assert all(t.error is None and t.gen.result.finish_reason == "length"
               for t in handed_back)
    assert policy.finished_by_priority == {"final": 1, "partial": 1, "request": 1}
    assert policy.engine.slots.free == 1  # every sequence freed


def test_fair_share_a_client_with_nothing_running_goes_before_a_flood():
    policy = _policy(n_seq=2)
    flood = [_add(policy, client="A") for _ in range(3)]
    other = _add(policy, client="B")
    plan = _pass(policy)
    assert plan.admitted == [flood[0], other]  # B before A's second, though it came later
    assert policy.waiting == flood[1:]


def test_fair_share_the_client_served_least_recently_goes_first():
    policy = _policy(n_seq=1)
    a1, a2 = _add(policy, client="A"), _add(policy, client="A")
    b1 = _add(policy, client="B")
    # A was admitted first; once it is done, B (never served) goes before A's second
    assert _run_all(policy) == [a1, b1, a2]


def test_a_final_preempts_a_less_urgent_sequence_which_resumes_later():
    policy = _policy(n_seq=1)
    request = _add(policy, PRIORITY_REQUEST, client="a", tokens=3)
    _pass(policy)
    assert policy.active == [request] and request.gen.kv is not None
    final = _add(policy, PRIORITY_FINAL, client="b")
    plan = _pass(policy)
    assert plan.preempted == [request] and plan.admitted == [final]
    assert request.gen.kv is None and policy.waiting == [request]
    assert request.gen.result.preemptions == 1 and policy.preemptions == 1
    assert _run_all(policy) == [request]  # it comes back once the final is done
    assert request.gen.result.finish_reason == "length" and len(request.gen.output) == 3
    assert request.error is None and final.error is None


def test_equal_rank_preemption_only_from_a_client_holding_two():
    policy = _policy(n_seq=2)
    a1, a2 = _add(policy, client="A", tokens=5), _add(policy, client="A", tokens=5)
    _pass(policy)
    b = _add(policy, client="B", tokens=5)
    plan = _pass(policy)
    assert plan.admitted == [b] and len(plan.preempted) == 1
    assert plan.preempted[0] in (a1, a2)
    # B now holds one: a second client's request takes nobody's place
    c = _add(policy, client="B", tokens=5)
    plan = _pass(policy)
    assert plan.preempted == [] and c in policy.waiting


def test_a_waiting_request_does_not_preempt_a_final():
    policy = _policy(n_seq=1)
    final = _add(policy, PRIORITY_FINAL, client="a", tokens=3)
    _pass(policy)
    request = _add(policy, PRIORITY_REQUEST, client="b")
    plan = _pass(policy)
    assert plan.preempted == [] and plan.batch == [final] and policy.waiting == [request]


@pytest.mark.parametrize(("mode", "expected"), [
    ("shared", ["final", "decoding", "prefilling"]),
    ("lead", ["final", "decoding"]),
    ("alone", ["final"]),
])
def test_what_a_pass_carries_while_a_final_runs(mode, expected):
    policy = _policy(n_seq=3, final_steps=mode)
    decoding = _add(policy, PRIORITY_REQUEST, client="a", tokens=9)
    _pass(policy)  # prefilled: decoding from now on
    final = _add(policy, PRIORITY_FINAL, client="b", tokens=9)
    prefilling = _add(policy, PRIORITY_PARTIAL, client="c", tokens=9)
    names = {id(final): "final", id(decoding): "decoding", id(prefilling): "prefilling"}
    plan = policy.plan()
    assert [names[id(t)] for t in plan.batch] == expected
    if mode == "lead":
        # the others' next token only: no proposals, no part of a draft
        assert decoding.gen.proposal_cap == decoding.gen.draft_cap == 0
    if mode == "shared":
        assert all(t.gen.proposal_cap == 1 << 30 for t in plan.batch)
    assert (plan.budget, plan.chunk) == (512, 256)


def test_proposals_are_capped_only_when_several_sequences_decode():
    policy = _policy(n_seq=2, crowded_proposals=2)
    a = _add(policy, client="a", tokens=9)
    _pass(policy)
    assert a.gen.phase is Phase.DECODE
    assert policy.plan().batch == [a] and a.gen.proposal_cap == 1 << 30
    b = _add(policy, client="b", tokens=9)
    _pass(policy)  # b prefills
    plan = policy.plan()
    assert plan.batch == [a, b] and a.gen.proposal_cap == b.gen.proposal_cap == 2


def test_drafts_are_verified_in_parts_only_when_the_pass_is_shared():
    policy = _policy(n_seq=2, crowded_draft=4)
    a = _add(policy, client="a", tokens=9)
    assert policy.plan().batch == [a] and a.gen.draft_cap == 1 << 30
    _pass(policy)
    b = _add(policy, client="b", tokens=9)
    plan = policy.plan()  # a decodes, b prefills (and would verify its draft)
    assert plan.batch == [a, b] and a.gen.draft_cap == b.gen.draft_cap == 4


def _unbiased(ticket):  # noqa: ANN001, ANN202 - a ticket, returned
    ticket.gen.req.beta = 0.0  # a final's default (final_beta 0)
    return ticket


def test_an_unbiased_final_verifies_its_draft_in_parts_of_final_draft():
    policy = _policy(n_seq=2, crowded_draft=4, final_draft=3, final_steps="shared")
    partial = _add(policy, PRIORITY_PARTIAL, client="a", tokens=9)
    final = _unbiased(_add(policy, PRIORITY_FINAL, client="b", tokens=9))
    plan = policy.plan()
    assert plan.batch == [final, partial]
    assert final.gen.draft_cap == 3 and partial.gen.draft_cap == 4


def test_an_unbiased_final_alone_verifies_in_parts_too():
    policy = _policy(n_seq=2, final_draft=3)
    final = _unbiased(_add(policy, PRIORITY_FINAL, client="b", tokens=9))
    assert policy.plan().batch == [final] and final.gen.draft_cap == 3


def test_any_draft_verified_without_bias_goes_in_parts_of_final_draft():
    """A final sent as a plain request (HTTP chat, the request's priority) or a partial at
    beta 0 verifies without bias as a final does: the same parts, alone or shared."""
    policy = _policy(n_seq=2, crowded_draft=8, final_draft=3)
    request = _unbiased(_add(policy, PRIORITY_PARTIAL, client="a", tokens=9))
    assert policy.plan().batch == [request] and request.gen.draft_cap == 3
    _pass(policy)
    _add(policy, client="b", tokens=9)
    policy.plan()
    assert request.gen.draft_cap == 3  # the smaller of the two caps


def test_a_biased_final_verifies_its_whole_draft_even_in_a_shared_pass():
    policy = _policy(n_seq=2, crowded_draft=4, final_draft=3, final_steps="shared")
    partial = _add(policy, PRIORITY_PARTIAL, client="a", tokens=9)
    final = _add(policy, PRIORITY_FINAL, client="b", tokens=9)  # final_beta null: biased
    plan = policy.plan()
    assert plan.batch == [final, partial]
    assert final.gen.draft_cap == 1 << 30 and partial.gen.draft_cap == 4


def test_final_draft_none_verifies_a_final_at_once():
    policy = _policy(n_seq=2, final_draft=None)
    final = _unbiased(_add(policy, PRIORITY_FINAL, client="b", tokens=9))
    assert policy.plan().batch == [final] and final.gen.draft_cap == 1 << 30


def test_drafts_are_verified_at_once_by_default():
    policy = _policy(n_seq=2)
    _add(policy, client="a", tokens=9)
    _add(policy, client="b", tokens=9)
    plan = policy.plan()
    assert len(plan.batch) == 2 and all(t.gen.draft_cap == 1 << 30 for t in plan.batch)


def test_a_generation_cancelled_while_waiting_costs_no_pass_and_no_sequence():
    policy = _policy(n_seq=1)
    ticket = _add(policy)
    ticket.cancel.set()
    plan = policy.plan()
    assert plan.cancelled == [ticket] and plan.batch == [] and plan.admitted == []
    assert ticket.gen.passes == 0 and not ticket.ever_admitted
    assert ticket.gen.result.finish_reason == "cancelled"
    assert policy.take_finished() == [ticket] and policy.engine.slots.free == 1
    assert not policy.has_work


def test_a_request_whose_own_cancel_flag_is_set_is_dropped_too():
    policy = _policy(n_seq=1)
    cancel = threading.Event()
    ticket = Ticket(gen=FakeGen([1, 2], req_cancel=cancel),  # type: ignore[arg-type]
                    priority=PRIORITY_REQUEST, client="a", order=0, cancel=threading.Event())
    policy.add(ticket)
    cancel.set()
    assert policy.plan().cancelled == [ticket]


def test_a_generation_cancelled_while_running_leaves_at_the_next_pass():
    policy = _policy(n_seq=1)
    ticket = _add(policy, tokens=50)
    _pass(policy)
    _pass(policy)
    assert policy.engine.slots.free == 0
    ticket.cancel.set()
    plan = policy.plan()
    assert plan.cancelled == [ticket] and plan.batch == []
    assert ticket.gen.result.finish_reason == "cancelled" and ticket.gen.passes == 2
    assert policy.take_finished() == [ticket] and policy.engine.slots.free == 1


def test_a_failed_pass_fails_its_generations_and_the_others_re_prefill():
    policy = _policy(n_seq=2, final_steps="alone")
    paused = _add(policy, PRIORITY_REQUEST, client="a", tokens=9)
    _pass(policy)
    final = _add(policy, PRIORITY_FINAL, client="b", tokens=9)
    plan = policy.plan()
    assert plan.batch == [final]  # the request pauses while the final runs
    boom = RuntimeError("llama_decode returned -1")
    policy.update(plan, error=boom)
    assert final.error is boom and final.gen.result.finish_reason == "error"
    assert policy.take_finished() == [final]
    assert policy.engine.rt.clears == 1  # the KV cache went
    assert policy.waiting == [paused] and paused.gen.kv is None  # it re-prefills
    assert paused.gen.result.preemptions == 1
    assert policy.engine.slots.free == 2
    assert _run_all(policy) == [paused] and paused.error is None


def test_a_failed_admission_fails_that_generation_only_and_forgets_its_sequence():
    policy = _policy(n_seq=1)

    def refuse() -> None:
        raise RuntimeError("this cache cannot be cut back")

    unlucky = _add(policy, client="a", on_admit=refuse)
    lucky = _add(policy, client="b")
    plan = policy.plan()
    assert plan.failed == [unlucky] and plan.admitted == [lucky]
    assert isinstance(unlucky.error, GenerationFailedError)
    assert "admitting the generation to a sequence failed" in str(unlucky.error)
    assert unlucky.gen.result.finish_reason == "error"
    assert (0, 0) in policy.engine.rt.truncations  # its sequence was forgotten
    assert policy.take_finished() == [unlucky]
    policy.engine.step(plan)
    policy.update(plan)
    assert _run_all(policy) == [] and lucky.gen.result.finish_reason == "length"


def test_a_failure_handing_a_generation_back_fails_that_generation_only():
    policy = _policy(n_seq=2)
    unlucky, lucky = _add(policy, client="a"), _add(policy, client="b")
    counted = policy.engine.finished

    def finished(gen) -> None:  # noqa: ANN001
        if gen is unlucky.gen:
            raise RuntimeError("a counter failed")
        counted(gen)

    policy.engine.finished = finished
    _run_all(policy)
    assert isinstance(unlucky.error, GenerationFailedError)
    assert "handing the generation back failed" in str(unlucky.error)
    assert lucky.error is None
    assert set(policy.take_finished()) == {unlucky, lucky}
    assert policy.engine.slots.free == 2


def test_reset_requeues_the_running_and_frees_every_sequence():
    policy = _policy(n_seq=2)
    a, b = _add(policy, client="a", tokens=5), _add(policy, client="b", tokens=1)
    _pass(policy)
    _pass(policy)  # b is done but, say, the loop failed before it was handed back
    policy.reset()
    assert policy.active == [] and policy.waiting == [a]
    assert set(policy.take_finished()) == {b}
    assert policy.engine.slots.free == 2 and policy.engine.rt.clears == 1


def test_abort_hands_back_everything_with_a_fresh_error_each():
    policy = _policy(n_seq=1)
    running, waiting = _add(policy, client="a", tokens=5), _add(policy, client="b")
    _pass(policy)
    policy.abort("error", error=lambda: RuntimeError("broken"))
    assert set(policy.take_finished()) == {running, waiting}
    assert running.error is not waiting.error
    assert running.gen.result.finish_reason == waiting.gen.result.finish_reason == "error"
    assert not policy.has_work


def test_time_waited_is_measured_and_requeued_work_waits_anew():
    policy = _policy(n_seq=1)
    request = _add(policy, PRIORITY_REQUEST, client="a", tokens=5)
    policy.clock.now += 2.0
    assert policy.oldest_wait_s(rank=1) == 2.0 and policy.oldest_wait_s(rank=0) == 0.0
    _pass(policy)
    assert request.gen.result.queue_ms == pytest.approx(2000.0)
    _add(policy, PRIORITY_FINAL, client="b")
    policy.clock.now += 1.0
    _pass(policy)  # preempted now: it waits again from now
    assert policy.oldest_wait_s(rank=1) == 0.0
    policy.clock.now += 0.5
    assert policy.oldest_wait_s(rank=1) == 0.5
