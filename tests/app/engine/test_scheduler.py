"""The step scheduler on the real model: shared forward passes change no output (up to
near-ties), finals and fair shares enter at step granularity, cancelled work leaves at the
next step, long prompts are prefilled in chunks, prefixes are copied between sequences."""

from __future__ import annotations

import threading
import time

import pytest

from app.engine.engine import Engine, GenerationRequest
from app.engine.scheduler import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    SchedulerConfig,
    StepScheduler,
)
from app.engine.verify import top2_gap
from app.translation.prompts import FewShotFormat
from tests.numerics import NEAR_TIE, first_difference

SOURCES = [
    "Scientists say the discovery could help doctors detect the disease much earlier.",
    "The museum is closed on Mondays, but the garden stays open until late evening.",
    "Our model translates each update of the transcript while the speaker is still talking.",
    "The weather was cold and rainy for the whole week.",
]


@pytest.fixture(scope="module")
def multi_runtime():
    """A context with four sequences (``--parallel 4``)."""
    from app.loader import load_model
    from app.settings import ModelSettings

    rt = load_model(ModelSettings(model=None, n_ctx=4096, parallel=4)).runtime
    yield rt
    rt.close()


@pytest.fixture()
def multi_engine(multi_runtime) -> Engine:
    multi_runtime.clear()
    return Engine(multi_runtime)


def _prompt(rt, source: str, lang: str = "de") -> list[int]:
    return rt.tokenize(FewShotFormat().translation(source, "en", lang).text, add_bos=True)


def _request(rt, source: str, lang: str = "de", **kw) -> GenerationRequest:
    kw.setdefault("max_tokens", 48)
    return GenerationRequest(prompt_tokens=_prompt(rt, source, lang), stop_strings=("\n",), **kw)


def _run_together(engine: Engine, reqs, config: SchedulerConfig | None = None,
                  priorities=None):
    sched = StepScheduler(engine, config)
    try:
        tickets = [sched.submit(engine.start(r), priority=(priorities or {}).get(i, 1),
                                client=f"c{i}", order=i, cancel=threading.Event())
                   for i, r in enumerate(reqs)]
        return [sched.run(t) for t in tickets], sched
    finally:
        sched.stop()


def _same_up_to_near_ties(engine: Engine, req: GenerationRequest, a: list[int],
                          b: list[int]) -> bool:
    if a == b:
        return True
    i = first_difference(a, b)
    engine.slots.clear()
    first, _ = engine.evaluate_prompt(list(req.prompt_tokens), a[:i])
    return top2_gap(engine.row(first + i)) < NEAR_TIE


def test_batched_outputs_equal_alone_for_ssbd_sessions_and_plain_requests(multi_engine):
    """Mixed in one batch: two SSBD updates (a previous translation as the draft, beta 0 and
    0.2) and two plain requests. Each output equals its output alone, up to near-ties."""
    rt = multi_engine.rt
    draft_src = rt.tokenize(" Wissenschaftler sagen, dass die Entdeckung")
    reqs = [
        _request(rt, SOURCES[0], draft=draft_src, beta=0.0),
        _request(rt, SOURCES[1], "ja"),
        _request(rt, SOURCES[2], draft=rt.tokenize(" Unser Modell übersetzt jede"), beta=0.2),
        _request(rt, SOURCES[3], "zh"),
    ]
    alone = []
    for r in reqs:
        multi_engine.slots.clear()
        alone.append(multi_engine.generate(r).tokens)
    multi_engine.slots.clear()
    together, sched = _run_together(multi_engine, reqs)
    assert sched.steps < sum(len(a) for a in alone)  # the passes were shared
    for r, a, t in zip(reqs, alone, together, strict=True):
        assert t.finish_reason in ("stop", "length")
        assert _same_up_to_near_ties(multi_engine, r, a, t.tokens), (rt.detokenize(a),
                                                                      t.text)


def test_chunked_prefill_and_prefix_copy_change_nothing(multi_engine):
    rt = multi_engine.rt
    reqs = [_request(rt, s) for s in SOURCES[:2]]
    alone = []
    for r in reqs:
        multi_engine.slots.clear()
        alone.append(multi_engine.generate(r).tokens)
    multi_engine.slots.clear()
    # small chunks: the few-shot prompt takes many steps; the second prompt's preamble is
    # copied from the first sequence instead of decoded
    first, _ = _run_together(multi_engine, reqs[:1], SchedulerConfig(prefill_chunk=32))
    second, _ = _run_together(multi_engine, reqs[1:], SchedulerConfig(prefill_chunk=32))
    assert first[0].forward_passes > len(reqs[0].prompt_tokens) // 32
    assert multi_engine.slots.stats.copied_tokens > 0 or second[0].prompt_tokens_cached > 0
    for r, a, t in zip(reqs, alone, first + second, strict=True):
        assert _same_up_to_near_ties(multi_engine, r, a, t.tokens)


def test_a_final_preempts_a_long_request_on_a_single_sequence(runtime):
    """``--parallel 1``: a final arriving while a long request holds the only sequence
    enters within two steps; the request is preempted, resumes, and its output is the same
    as without the interruption."""
    runtime.clear()
    engine = Engine(runtime)
    long_req = _request(runtime, " ".join(SOURCES * 3), max_tokens=120)
    final_req = _request(runtime, "Thank you.")
    engine.slots.clear()
    uninterrupted = engine.generate(long_req).tokens
    engine.slots.clear()

    sched = StepScheduler(engine, SchedulerConfig(prefill_chunk=64))
    try:
        long_ticket = sched.submit(engine.start(long_req), priority=PRIORITY_REQUEST,
                                   client="a", order=0, cancel=threading.Event())
        while sched.steps < 6:
            time.sleep(0.001)
        at_submit = sched.steps
        final_ticket = sched.submit(engine.start(final_req), priority=PRIORITY_FINAL,
                                    client="b", order=1, cancel=threading.Event())
        admitted_at: list[int] = []
        while final_ticket.admitted_at is None:
            time.sleep(0.0005)
        admitted_at.append(sched.steps)
        final = sched.run(final_ticket)
        resumed = sched.run(long_ticket)
    finally:
        sched.stop()
    print(f"final submitted at step {at_submit}, admitted at step {admitted_at[0]}")
    assert admitted_at[0] - at_submit <= 2
    assert final.text.strip() and resumed.preemptions >= 1
    assert _same_up_to_near_ties(engine, long_req, uninterrupted, resumed.tokens)


def test_fair_share_a_third_clients_final_is_not_starved(multi_engine):
    """Client A runs a ~3,500-token request, client B floods finals; client C's final is
    admitted within two steps (taking the place of one of B's) and captioned within its
    own decode steps plus at most two."""
    rt = multi_engine.rt
    long_source = " ".join(SOURCES * 40)
    long_req = GenerationRequest(prompt_tokens=rt.tokenize(long_source)[:3500],
                                 max_tokens=64)
    sched = StepScheduler(multi_engine, SchedulerConfig(prefill_chunk=256))
    try:
        sched.submit(multi_engine.start(long_req), priority=PRIORITY_REQUEST, client="A",
                     order=0, cancel=threading.Event())
        flood = [sched.submit(multi_engine.start(_request(rt, s)), priority=PRIORITY_FINAL,
                              client="B", order=1 + i, cancel=threading.Event())
                 for i, s in enumerate(SOURCES * 2)]
        while sched.steps < 3:
            time.sleep(0.001)
        at_submit = sched.steps
        mine = sched.submit(multi_engine.start(_request(rt, "See you tomorrow.")),
                            priority=PRIORITY_FINAL, client="C", order=100,
                            cancel=threading.Event())
        while mine.admitted_at is None:
            time.sleep(0.0005)
        admitted = sched.steps
        result = sched.run(mine)
        finished = sched.steps
        for t in flood:
            sched.run(t)
    finally:
        sched.stop()
    own = result.forward_passes
    print(f"C's final: submitted at step {at_submit}, admitted at {admitted}, done by "
          f"{finished} ({own} passes of its own)")
    assert admitted - at_submit <= 2 and result.text.strip()
    assert finished - at_submit <= own + 2 + 1  # +1: the step running when it was polled


def test_a_cancelled_generation_leaves_at_the_next_step(multi_engine):
    rt = multi_engine.rt
    sched = StepScheduler(multi_engine)
    cancel = threading.Event()
    try:
        ticket = sched.submit(multi_engine.start(_request(rt, SOURCES[2], max_tokens=200)),
                              priority=PRIORITY_PARTIAL, client="a", order=0, cancel=cancel)
        while ticket.gen.result.forward_passes < 3:
            time.sleep(0.0005)
        passes = ticket.gen.result.forward_passes
        cancel.set()
        result = sched.run(ticket)
    finally:
        sched.stop()
    assert result.finish_reason == "cancelled"
    assert result.forward_passes - passes <= 1


def test_a_failed_step_fails_its_sequences_and_the_scheduler_goes_on(runtime, monkeypatch):
    runtime.clear()
    engine = Engine(runtime)
    real_step = engine.step
    calls = {"n": 0}

    def failing_once(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("llama_decode returned -1")
        return real_step(*args, **kwargs)

    monkeypatch.setattr(engine, "step", failing_once)
    sched = StepScheduler(engine)
    try:
        doomed = sched.submit(engine.start(_request(runtime, "Good morning.")),
                              priority=PRIORITY_REQUEST, client="a", order=0,
                              cancel=threading.Event())
        with pytest.raises(RuntimeError, match="llama_decode"):
            sched.run(doomed)
        fine = sched.submit(engine.start(_request(runtime, "Good evening.")),
                            priority=PRIORITY_REQUEST, client="a", order=1,
                            cancel=threading.Event())
        assert sched.run(fine).text.strip()
    finally:
        sched.stop()


def test_held_direction_prefixes_are_copied_not_decoded_and_change_nothing(multi_engine):
    """``--langs``: each served direction's preamble is decoded once at start
    (``Engine.hold_prefixes``); a first request of that direction copies it and decodes
    only its own part, with the same output as from an empty cache (up to near-ties)."""
    from app.translation.prompts.parts import tokenize_prompt
    from app.translation.prompts.prefixes import direction_prefix

    rt, fmt = multi_engine.rt, FewShotFormat()
    reqs = [GenerationRequest(prompt_tokens=tokenize_prompt(fmt.translation(SOURCES[0], "en", lang),
                                                            rt.tokenize),
                              max_tokens=48, stop_strings=("\n",)) for lang in ("de", "ja")]
    alone = []
    for r in reqs:
        multi_engine.slots.clear()
        alone.append(multi_engine.generate(r).tokens)
    multi_engine.slots.clear()
    prefixes = [direction_prefix(fmt, "en", lang, rt.tokenize) for lang in ("de", "ja")]
    assert multi_engine.hold_prefixes(prefixes) == sum(len(p) for p in prefixes)
    before = multi_engine.tokens_decoded
    held, _ = _run_together(multi_engine, reqs)
    fresh = sum(len(r.prompt_tokens) - len(p) for r, p in zip(reqs, prefixes, strict=True))
    assert multi_engine.tokens_decoded - before - sum(len(t.tokens) for t in held) <= fresh
    for r, p, a, t in zip(reqs, prefixes, alone, held, strict=True):
        assert t.prompt_tokens_cached >= len(p) > 20
        assert _same_up_to_near_ties(multi_engine, r, a, t.tokens)
