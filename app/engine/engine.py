"""The decoding engine: prefix-cached prompts, one-pass draft verification, KV truncation.

Everything that touches the model goes through ``Engine.generate``. One call handles plain
greedy decoding, sampling, SSBD (a previous translation verified in the same forward pass
as the new prompt suffix, with beta-mixing) and drafters for new tokens (proposals verified
exactly, greedy or by speculative sampling). Plain autoregressive decoding is simply a call
with an empty draft and no drafters, so the baseline and the method share every line of
code except the draft itself.

The KV cache is kept between calls: ``cached`` mirrors the tokens whose keys and values sit
in sequence 0, and a new prompt only decodes what differs from it (the few-shot preamble and
the unchanged start of a growing source are never recomputed).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.engine.draft_stats import SSBD, DraftStats
from app.engine.runtime import LlamaRuntime
from app.engine.text_stream import TextStream
from app.engine.verify import SelectionStats, biased_greedy, greedy, sampled
from app.pathology import ends_in_loop
from drafters.base import DraftContext


class ContextOverflowError(ValueError):
    """The prompt does not fit into the context window."""


class ProposalSource(Protocol):
    """What the engine needs from a drafter chain (see ``drafters.chain``)."""

    def propose_from(self, ctx: DraftContext, k: int):  # -> object with .tokens, .source
        ...


@dataclass
class GenerationRequest:
    prompt_tokens: list[int]
    max_tokens: int = 256
    stop_strings: tuple[str, ...] = ()
    draft: Sequence[int] = ()  # SSBD draft: the previous translation's tokens
    beta: float = 0.0
    bias_limit: int | None = None  # draft positions >= this are verified without bias
    temperature: float = 0.0
    seed: int | None = None
    drafters: ProposalSource | None = None  # proposals for tokens past the draft
    draft_budget: int = 6
    previous: Sequence[int] = ()  # the session's previous output, for the "previous" drafter
    stop_on_loop: bool = False  # end when the output repeats one span three times in a row
    cancel: threading.Event | None = None
    on_text: Callable[[str], None] | None = None


@dataclass
class GenerationResult:
    tokens: list[int]
    text: str
    finish_reason: str  # "stop" | "length" | "cancelled"
    prompt_tokens: int
    prompt_tokens_cached: int
    drafts: DraftStats = field(default_factory=DraftStats)  # proposed/accepted by source
    forward_passes: int = 0
    decode_ms: float = 0.0
    prompt_ms: float = 0.0  # the first forward pass (prompt suffix + draft)
    lse_computed: int = 0
    looped: bool = False  # ended by the loop detector

    # Read-only views of ``drafts`` under the names the API has always used.
    @property
    def draft_tokens(self) -> int:
        return self.drafts.total_proposed

    @property
    def accepted_tokens(self) -> int:
        return self.drafts.total_accepted

    @property
    def ssbd_draft_tokens(self) -> int:
        return self.drafts.ssbd_proposed

    @property
    def ssbd_accepted_tokens(self) -> int:
        return self.drafts.ssbd_accepted

    @property
    def new_tokens(self) -> int:
        return len(self.tokens) - self.accepted_tokens

    @property
    def runaway(self) -> bool:
        """Cut off rather than finished: hit the token cap or fell into a loop."""
        return self.looped or self.finish_reason == "length"


class Engine:
    """Owns one ``LlamaRuntime`` and its KV cache. Not thread-safe: one worker calls it."""

    def __init__(self, runtime: LlamaRuntime) -> None:
        self.rt = runtime
        self.cached: list[int] = []
        self.tokens_decoded = 0  # every token ever sent through llama_decode
        self.forward_passes = 0
        self.finish_reasons: Counter[str] = Counter()  # how generations ended, for metrics

    # -- primitives ------------------------------------------------------------------------
    def common_prefix(self, tokens: Sequence[int]) -> int:
        n = min(len(tokens), len(self.cached))
        i = 0
        while i < n and self.cached[i] == tokens[i]:
            i += 1
        return i

    def truncate(self, pos: int) -> None:
        """Forget KV entries from ``pos`` on, so decoding can continue from there."""
        if pos < len(self.cached):
            self.rt.truncate(pos)
            del self.cached[pos:]

    def decode(self, tokens: list[int], logits_at: list[int]) -> None:
        """Append ``tokens`` to the cache in ONE forward pass, with logits at ``logits_at``."""
        self.rt.decode(tokens, len(self.cached), logits_at)
        self.cached.extend(tokens)
        self.tokens_decoded += len(tokens)
        self.forward_passes += 1

    def row(self, index: int) -> np.ndarray:
        return self.rt.logits_row(index)

    def evaluate_prompt(self, prompt: list[int], extra: Sequence[int] = ()) -> tuple[int, int]:
        """Decode what the cache lacks of ``prompt`` plus ``extra`` in one pass.

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

    # -- generation ------------------------------------------------------------------------
    def generate(self, req: GenerationRequest) -> GenerationResult:
        t_start = time.perf_counter()
        prompt = list(req.prompt_tokens)
        room = self.rt.n_ctx - len(prompt)
        if room <= 1:
            raise ContextOverflowError(
                f"prompt has {len(prompt)} tokens; the context holds {self.rt.n_ctx}"
            )
        max_tokens = max(0, min(req.max_tokens, room - 1))
        draft = list(req.draft)[:max_tokens]
        stats = SelectionStats()
        rng = np.random.default_rng(req.seed) if req.temperature > 0 else None
        passes_before = self.forward_passes

        def choose(row: np.ndarray, draft_token: int | None, beta: float) -> int:
            if rng is not None:
                return sampled(row, draft_token, beta, req.temperature, rng)
            if draft_token is None:
                return greedy(row)
            return biased_greedy(row, draft_token, beta, stats)

        stream = TextStream(stop_strings=req.stop_strings)
        out: list[int] = []
        result = GenerationResult(
            tokens=out, text="", finish_reason="stop", prompt_tokens=len(prompt),
            prompt_tokens_cached=0,
        )

        def emit(token: int) -> bool:
            """Append one token; True when generation must end here."""
            out.append(token)
            delta = stream.feed(self.rt.token_bytes(token))
            if delta and req.on_text is not None:
                req.on_text(delta)
            if stream.stopped:
                out.pop()  # the stop token is not part of the translation (nor of a draft)
                result.finish_reason = "stop"
                return True
            if len(out) >= max_tokens:
                result.finish_reason = "length"
                return True
            if req.stop_on_loop and ends_in_loop(out):
                result.finish_reason = "stop"
                result.looped = True
                return True
            return False

        # 1. Prompt suffix + SSBD draft in ONE forward pass, logits at every draft position.
        first, reuse = self.evaluate_prompt(prompt, draft)
        result.prompt_tokens_cached = reuse
        result.prompt_ms = (time.perf_counter() - t_start) * 1000
        done = max_tokens == 0
        next_token: int | None = None
        accepted = 0
        if done:
            result.finish_reason = "length"
        bias_limit = len(draft) if req.bias_limit is None else req.bias_limit
        for i, d in enumerate(draft):
            tok = choose(self.row(first + i), d, req.beta if i < bias_limit else 0.0)
            if tok != d:
                next_token = tok
                break
            accepted += 1
            if emit(d):
                done = True
                break
        else:
            if not done:
                # Whole draft accepted: the token after it is the model's own, unbiased; the
                # draft's end is no evidence that the translation ends there.
                next_token = choose(self.row(first + len(draft)), None, 0.0)
        result.drafts.add(SSBD, len(draft), accepted)
        self.truncate(len(prompt) + accepted)

        # 2. Decode on, verifying drafter proposals for the new tokens.
        while not done:
            assert next_token is not None
            if req.cancel is not None and req.cancel.is_set():
                result.finish_reason = "cancelled"
                break
            if self.rt.is_eog(next_token):
                result.finish_reason = "stop"
                break
            if emit(next_token):
                break
            if len(self.cached) + 1 >= self.rt.n_ctx:
                result.finish_reason = "length"
                break
            proposal: list[int] = []
            source = ""
            if req.drafters is not None and req.draft_budget > 0:
                budget = min(
                    req.draft_budget,
                    max_tokens - len(out),
                    self.rt.n_ctx - len(self.cached) - 2,
                )
                if budget > 0:
                    ctx = DraftContext(history=out, prompt=prompt, previous=req.previous)
                    prop = req.drafters.propose_from(ctx, budget)
                    proposal, source = list(prop.tokens)[:budget], prop.source
            self.decode([next_token, *proposal], list(range(len(proposal) + 1)))
            n_acc = 0
            next_token = None
            for j, d in enumerate(proposal):
                tok = choose(self.row(j), d, 0.0)
                if tok != d:
                    next_token = tok
                    break
                n_acc += 1
                if emit(d):
                    done = True
                    break
            else:
                if not done:
                    next_token = choose(self.row(len(proposal)), None, 0.0)
            if proposal:
                result.drafts.add(source, len(proposal), n_acc)
                record = getattr(req.drafters, "record", None)
                if record is not None:
                    record(len(proposal), n_acc)
            # Drop the KV entries of rejected proposal tokens.
            self.truncate(len(self.cached) - (len(proposal) - n_acc))

        tail = stream.finish()
        if tail and req.on_text is not None:
            req.on_text(tail)
        result.text = stream.text
        result.forward_passes = self.forward_passes - passes_before
        result.lse_computed = stats.lse_computed
        result.decode_ms = (time.perf_counter() - t_start) * 1000
        self.finish_reasons[result.finish_reason] += 1
        return result
