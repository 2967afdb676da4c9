"""The decoding engine: one forward pass per step, shared by every running sequence.

A step is ONE ``llama_decode`` over a batch that holds, for each running generation
(``SequenceGeneration``), what it needs next: a chunk of its prompt, its prompt's last
chunk plus the SSBD draft to verify, or one new token plus drafter proposals. Logits are
requested only for the rows that are read. Plain autoregressive decoding is a generation
with an empty draft and no drafters, so the baseline and the method share every line of
code except the draft itself, and a generation alone (``generate``) runs the same steps as
one among many (``step``, driven by ``app.engine.scheduler``).

KV caches persist per sequence between generations (``app.engine.kv_slots``): a new prompt
only decodes what its sequence does not hold yet.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.generation import (
    ContextOverflowError,
    GenerationRequest,
    GenerationResult,
    ProposalSource,
)
from app.engine.kv_slots import KvSlots, SeqKV
from app.engine.runtime import LlamaRuntime
from app.engine.sequence import Phase, SequenceGeneration

__all__ = ["ContextOverflowError", "Engine", "GenerationRequest", "GenerationResult",
           "ProposalSource", "StepReport"]


@dataclass
class StepReport:
    """What one step did, for the scheduler's metrics."""

    rows: int = 0  # batch rows decoded
    sequences: int = 0  # generations with rows in the batch


def count_rows(gen: SequenceGeneration, n: int) -> None:
    """Count the rows ``gen`` planned for this step by kind (``app.engine.timings``)."""
    timing = gen.timing
    draft = gen.draft_rows
    timing.verify_rows += draft
    if gen.phase is Phase.DECODE:
        timing.decode_steps += 1
        timing.decode_rows += n - draft
    else:
        timing.prefill_rows += n - draft


class Engine:
    """Owns one ``LlamaRuntime``, its sequences and their KV caches. One thread calls it."""

    def __init__(self, runtime: LlamaRuntime, share_prefixes: bool = True) -> None:
        self.rt = runtime
        self.slots = KvSlots(runtime, share_prefixes=share_prefixes)
        self.tokens_decoded = 0  # every token ever sent through llama_decode
        self.forward_passes = 0
        self.finish_reasons: Counter[str] = Counter()  # how generations ended, for metrics

    # -- single-sequence primitives on sequence 0 (benchmarks and tests) ---------------------
    @property
    def cached(self) -> list[int]:
        return self.slots.slots[0].cached

    def common_prefix(self, tokens: Sequence[int]) -> int:
        return self.slots.slots[0].common_prefix(tokens)

    def truncate(self, pos: int) -> None:
        """Forget sequence 0's KV entries from ``pos`` on."""
        self.slots.slots[0].truncate(pos)

    def decode(self, tokens: list[int], logits_at: list[int]) -> None:
        """Append ``tokens`` to sequence 0 in ONE forward pass, with logits at ``logits_at``."""
        kv = self.slots.slots[0]
        self.rt.decode(tokens, len(kv.cached), logits_at, seq=0)
        kv.cached.extend(tokens)
        self.tokens_decoded += len(tokens)
        self.forward_passes += 1

    def row(self, index: int) -> np.ndarray:
        return self.rt.logits_row(index)

    def evaluate_prompt(self, prompt: list[int], extra: Sequence[int] = ()) -> tuple[int, int]:
        """Decode what sequence 0 lacks of ``prompt`` plus ``extra`` in one pass.

        Logits are requested at the last prompt token and at every ``extra`` token. Returns
        (batch index of the last prompt token's logits, number of prompt tokens reused).
        """
        if not prompt:
            raise ValueError("empty prompt")
        reuse = self.common_prefix(prompt)
        if reuse == len(prompt):
            reuse -= 1  # the last prompt token must be recomputed to get its logits
        self.truncate(reuse)
        batch = list(prompt[reuse:]) + list(extra)
        first = len(prompt) - reuse - 1
        self.decode(batch, list(range(first, len(batch))))
        return first, reuse

    def hold_prefixes(self, prefixes: Sequence[Sequence[int]]) -> int:
        """Decode each prefix into a sequence of its own (as many as there are sequences),
        before any generation runs: a prompt starting with one is then copied, not decoded
        (``KvSlots.acquire``). Returns the tokens decoded. No logits are asked for.

        Runs on the engine's one thread like everything else here: at start, before the
        worker takes jobs."""
        fitting = [list(p) for p in prefixes if 0 < len(p) < self.rt.n_ctx]
        decoded = 0
        for kv, prefix in zip(self.slots.slots, fitting, strict=False):
            kv.forget()
            self.rt.decode(prefix, 0, [], seq=kv.seq_id)
            kv.cached.extend(prefix)
            kv.last_used = time.monotonic()
            decoded += len(prefix)
            self.tokens_decoded += len(prefix)
            self.forward_passes += 1
        return decoded

    # -- generations -----------------------------------------------------------------------
    def start(self, req: GenerationRequest) -> SequenceGeneration:
        """A generation ready to be attached to a sequence (raises on an oversized prompt)."""
        result = GenerationResult(tokens=[], text="", finish_reason="stop",
                                  prompt_tokens=len(req.prompt_tokens), prompt_tokens_cached=0)
        return SequenceGeneration(req, self.rt, result)

    def step(self, gens: Sequence[SequenceGeneration], budget: int, chunk: int) -> StepReport:
        """ONE forward pass over the next rows of ``gens`` (in priority order).

        ``budget`` bounds the rows of the step and ``chunk`` the prompt rows of one
        generation (``gen.proposal_cap`` its drafter proposals); the first generation may
        exceed ``budget`` when its smallest useful step is larger (a long draft to verify),
        so every step makes progress.
        """
        rows: list[tuple[int, int, int, bool]] = []
        parts: list[tuple[SequenceGeneration, int]] = []
        cap = self.rt.n_ctx
        clock = time.perf_counter
        for gen in gens:
            if gen.done or gen.kv is None:
                continue
            room = budget - len(rows)
            if not rows:
                room = min(cap, max(room, gen.minimal_rows()))
            t0 = clock()
            planned = gen.plan(room, chunk)
            gen.timing.python_step_ms += (clock() - t0) * 1000
            if not planned:
                continue
            count_rows(gen, len(planned))
            parts.append((gen, len(rows)))
            seq = gen.kv.seq_id
            rows.extend((tok, pos, seq, logits) for tok, pos, logits in planned)
        report = StepReport(rows=len(rows), sequences=len(parts))
        if not rows:
            return report
        t0 = clock()
        self.rt.decode_rows(rows)
        forward_ms = (clock() - t0) * 1000
        self.tokens_decoded += len(rows)
        self.forward_passes += 1
        for gen, base in parts:
            timing = gen.timing
            if timing.first_step is None:
                timing.first_step = t0
            if gen.phase is Phase.DECODE:
                timing.forward_decode_ms += forward_ms
            else:
                timing.forward_prefill_ms += forward_ms
            t1 = clock()
            gen.absorb(self.rt.logits_row, base)
            timing.python_step_ms += (clock() - t1) * 1000
        return report

    def finished(self, gen: SequenceGeneration) -> None:
        self.finish_reasons[gen.result.finish_reason] += 1

    def attach(self, gen: SequenceGeneration, kv: SeqKV) -> None:
        gen.attach(kv)

    def generate(self, req: GenerationRequest,
                 draft_cap: int | None = None) -> GenerationResult:
        """One generation alone, on the caller's thread, on sequence 0 (benchmarks, eval).

        The whole prompt suffix and draft go in one pass, as the step scheduler does for a
        sequence whose prompt fits its prefill chunk; with ``draft_cap``, the draft in
        parts of that many tokens a pass, as in a crowded pass (``crowded_draft``).
        """
        gen = self.start(req)
        if draft_cap is not None:
            gen.draft_cap = draft_cap
        kv = self.slots.slots[0]
        kv.busy = True
        try:
            gen.attach(kv)
            cap = self.rt.n_ctx
            while gen.phase is not Phase.DONE:
                if not self.step([gen], budget=cap, chunk=cap).rows and not gen.done:
                    raise RuntimeError("a generation made no progress")  # a bug, not input
        finally:
            self.slots.release(kv)
        self.finished(gen)
        return gen.result
