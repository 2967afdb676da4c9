"""Where one update's time goes: a per-update breakdown, filled in by every layer it crosses.

Why: a re-translation server's lead over a plain one is bounded by the work outside the
model's rows (issue 32's limit ``1 / ((1 - A/O) + A/O * c)``), and that work is spread over
the HTTP route, the translator, the event loop, the scheduler thread and the engine. One
accumulator per update, handed down through a ``ContextVar`` (asyncio tasks inherit it),
lets each layer add its own part without knowing the others; the scheduler thread, which
runs many updates' sequences at once, writes into the generation's own ``StepTimings``
and the awaiting job folds it in when the generation is done.

Every part is wall time in milliseconds of the update's own path; parts measured on the
scheduler thread (``forward_*``, ``python_*``) are that update's share of each step: a
step's forward pass is counted whole for every sequence in it (they all waited for it).
``benchmark`` tools subtract the sum of the parts from the client's own wall time to see
what is left (HTTP, JSON, the client).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields

# The parts of an update, in the order an update crosses them (the names the API reports).
PARTS: tuple[str, ...] = (
    "parse_ms",  # the request received -> the route's handler runs (body, validation)
    "prepare_ms",  # the handler: limits, languages, the session taken
    "prompt_ms",  # the draft plan, context, glossary, prompt rendering, drafter chain
    "job_start_ms",  # the job filed -> its coroutine runs on the event loop
    "tokenize_ms",  # prompt, draft and source tokenized (the job)
    "admit_wait_ms",  # a generation filed -> its first step (the scheduler's queue)
    "forward_prefill_ms",  # forward passes that carried its prompt rows (and its draft)
    "forward_decode_ms",  # forward passes of its decode steps (one token + proposals)
    "python_step_ms",  # plan + absorb of its rows: verify, choose, cut the cache
    "detokenize_ms",  # token bytes -> text, stop strings (inside python_step_ms)
    "drafters_ms",  # drafter proposals (inside python_step_ms)
    "step_wait_ms",  # between its steps: other sequences' Python, the scheduler's lock
    "hop_ms",  # the generation done (scheduler thread) -> the job resumes (event loop)
    "verdict_ms",  # pathology checks, framing, display mask, next draft (the job)
    "finish_ms",  # the job done -> the session committed, the answer's object built
)
# Counts, not times.
COUNTS: tuple[str, ...] = ("prefill_rows", "verify_rows", "decode_rows", "decode_steps",
                           "generations")
# Parts that are already inside another part (not added to the total).
NESTED: frozenset[str] = frozenset({"detokenize_ms", "drafters_ms"})


@dataclass
class StepTimings:
    """One generation's share of the scheduler thread's work (written by that thread only)."""

    submitted: float = 0.0  # perf_counter when the generation was filed
    first_step: float | None = None
    done: float | None = None  # perf_counter when it finished
    forward_prefill_ms: float = 0.0
    forward_decode_ms: float = 0.0
    python_step_ms: float = 0.0
    detokenize_ms: float = 0.0
    drafters_ms: float = 0.0
    prefill_rows: int = 0
    verify_rows: int = 0
    decode_rows: int = 0
    decode_steps: int = 0

    def lifetime_ms(self) -> float:
        end = self.done if self.done is not None else time.perf_counter()
        start = self.first_step if self.first_step is not None else end
        return max(0.0, (end - start) * 1000)


class UpdateTimings:
    """The parts of one update (``PARTS`` and ``COUNTS``), added up as it goes."""

    def __init__(self, received: float | None = None) -> None:
        self.received = time.perf_counter() if received is None else received
        self.values: dict[str, float] = dict.fromkeys(PARTS + COUNTS, 0.0)
        self.generating_ms = 0.0  # generations filed -> job resumed (for ``verdict_ms``)

    def add(self, part: str, ms: float) -> None:
        self.values[part] += ms

    def since(self, part: str, t0: float) -> float:
        """Add the time since ``t0`` (a ``perf_counter``) to ``part``; returns now."""
        now = time.perf_counter()
        self.values[part] += (now - t0) * 1000
        return now

    @contextmanager
    def span(self, part: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.since(part, t0)

    @contextmanager
    def job(self) -> Iterator[None]:
        """A job's coroutine: its time that is neither tokenizing nor waiting for its
        generations is the verdict's (pathology checks, framing, mask, next draft)."""
        t0 = time.perf_counter()
        tokenize, generating = self.values["tokenize_ms"], self.generating_ms
        try:
            yield
        finally:
            wall = (time.perf_counter() - t0) * 1000
            inner = (self.values["tokenize_ms"] - tokenize) + (self.generating_ms - generating)
            self.values["verdict_ms"] += max(0.0, wall - inner)

    def add_generation(self, steps: StepTimings, resumed: float) -> None:
        """Fold a finished generation's scheduler-side parts in (``resumed``: when the job
        awoke on the event loop)."""
        v = self.values
        first = steps.first_step if steps.first_step is not None else steps.done
        if first is not None:
            v["admit_wait_ms"] += max(0.0, (first - steps.submitted) * 1000)
        for f in fields(StepTimings):
            if f.name in v:
                v[f.name] += getattr(steps, f.name)
        busy = steps.forward_prefill_ms + steps.forward_decode_ms + steps.python_step_ms
        v["step_wait_ms"] += max(0.0, steps.lifetime_ms() - busy)
        if steps.done is not None:
            v["hop_ms"] += max(0.0, (resumed - steps.done) * 1000)
        v["generations"] += 1
        self.generating_ms += max(0.0, (resumed - steps.submitted) * 1000)

    def total_ms(self) -> float:
        """The sum of the (non-nested) parts: the update's time inside the server."""
        return sum(v for k, v in self.values.items() if k in PARTS and k not in NESTED)

    def report(self) -> dict[str, float | int]:
        """The parts as the API reports them (ms rounded to 0.01, counts as ints)."""
        out: dict[str, float | int] = {k: round(self.values[k], 2) for k in PARTS}
        out.update({k: int(self.values[k]) for k in COUNTS})
        out["server_ms"] = round(self.total_ms(), 2)
        return out


# The update the current task works for (None: nobody is measuring, e.g. the eval harness).
current_timings: ContextVar[UpdateTimings | None] = ContextVar("livetrans_update_timings",
                                                               default=None)


def timings() -> UpdateTimings | None:
    return current_timings.get()


@contextmanager
def timed(part: str) -> Iterator[None]:
    """Add the block's wall time to ``part`` of the current update, if one is measured."""
    t = current_timings.get()
    if t is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        t.since(part, t0)
