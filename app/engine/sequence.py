"""One sequence's generation: a small state machine advanced one forward pass at a time.

The step scheduler puts many of these into one ``llama_batch``. Each step a generation says
which rows it adds (``plan``) and, after the shared forward pass, reads its own logits rows
and moves on (``absorb``):

* ``PREFILL``: the prompt (or, after a preemption, prompt + output so far) is decoded in
  chunks. The last chunk of a fresh prompt carries the SSBD draft, so the previous
  translation is verified in the same forward pass as the prompt's new suffix.
* ``DECODE``: one new token plus a drafter's proposals per step, or, while the SSBD
  draft was verified in parts (``draft_cap``, a crowded pass), its next part.
* ``DONE``: finished (stop string, end of generation, token cap, loop, cancelled).

Both kinds of draft, the SSBD draft and drafter proposals, go through ONE ``_verify``:
accept up to the first mismatch, take the model's token there, and cut the KV cache back.
The KV cache of the sequence is mirrored by ``SeqKV.cached``; between steps it always holds
exactly ``prompt + output`` (DECODE) or a prefix of the prefill target (PREFILL).
"""

from __future__ import annotations

import time
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from app.engine.draft_stats import SSBD
from app.engine.generation import ContextOverflowError, GenerationRequest, GenerationResult
from app.engine.text_stream import TextStream
from app.engine.timings import StepTimings
from app.engine.verify import SelectionStats, biased_greedy, greedy, sampled
from app.translation.pathology import ends_in_loop
from drafters.base import DraftContext

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.engine.kv_slots import SeqKV
    from app.engine.runtime import LlamaRuntime

Row = tuple[int, int, bool]  # (token, position, wants logits)


class Phase(Enum):
    PREFILL = "prefill"
    DECODE = "decode"
    DONE = "done"


class SequenceGeneration:
    """The state of one generation between steps (see the module docstring)."""

    def __init__(self, req: GenerationRequest, rt: LlamaRuntime,
                 result: GenerationResult) -> None:
        self.req = req
        self.rt = rt
        self.prompt = list(req.prompt_tokens)
        if not self.prompt:
            raise ValueError("empty prompt")
        room = rt.n_ctx - len(self.prompt)
        if room <= 1:
            raise ContextOverflowError(
                f"prompt has {len(self.prompt)} tokens; the context holds {rt.n_ctx}")
        self.max_tokens = max(0, min(req.max_tokens, room - 1))
        self.draft = list(req.draft)[: self.max_tokens]
        self.bias_limit = len(self.draft) if req.bias_limit is None else req.bias_limit
        self.rng = np.random.default_rng(req.seed) if req.temperature > 0 else None
        self.selection = SelectionStats()
        self.stream = TextStream(stop_strings=req.stop_strings, client_stops=req.client_stops,
                                 answer_stops=req.answer_stops,
                                 answer_begun=req.answer_begun)
        self.out: list[int] = result.tokens
        self.result = result
        self.phase = Phase.PREFILL
        self.kv: SeqKV | None = None
        self.resumed = False  # preempted once: re-prefill prompt + output, nothing to verify
        self.next_token: int | None = None
        self.t_start = time.perf_counter()
        self.timing = StepTimings(submitted=self.t_start)  # this generation's share of steps
        self.steps = 0
        # drafter proposals this step may carry (the engine lowers it in crowded steps)
        self.proposal_cap = 1 << 30
        # SSBD draft tokens one pass may verify (the policy lowers it in crowded passes:
        # there every row costs what a useful one does, and a draft's rows past its first
        # mismatch are thrown away). The rest waits in ``_pending`` for the next passes.
        self.draft_cap = 1 << 30
        self._pending: list[int] = []  # the draft's unverified rest, after ``next_token``
        self._pending_at = 0  # the index in ``draft`` of ``_pending[0]``
        self._chunk: list[int] = []  # the part of the draft the prefill pass verifies
        # the draft, verified in parts, ended at the token now decoded: the row after it is
        # the model's own choice, unbiased, as after a draft verified at once
        self._draft_ended = False
        # what the current step carries, for ``absorb``
        self._rows: list[int] = []
        self._verifies_draft = False
        self._proposal: list[int] = []
        self._source = ""

    # -- state -----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    @property
    def draft_rows(self) -> int:
        """How many of the rows just planned carry SSBD draft tokens (all of the draft, or
        the part of it a crowded pass verifies)."""
        if self.phase is Phase.PREFILL:
            return len(self._chunk) if self._verifies_draft else 0
        return len(self._proposal) if self._source == SSBD else 0

    @property
    def target(self) -> list[int]:
        """The tokens the KV cache must hold before the next new token is chosen."""
        return self.prompt + self.out if self.resumed else self.prompt

    def attach(self, kv: SeqKV) -> None:
        """Run on sequence ``kv``: reuse what it caches of the target, drop the rest."""
        self.kv = kv
        target = self.target
        reuse = kv.common_prefix(target)
        if not self.resumed and reuse == len(target):
            reuse -= 1  # the last prompt token is recomputed: its logits start the answer
        kv.truncate(reuse)
        if self.steps == 0 and not self.resumed:
            self.result.prompt_tokens_cached = reuse
        if self.resumed and reuse == len(target):
            self.phase = Phase.DECODE

    def detach(self) -> SeqKV | None:
        """Give the sequence up (preemption); the next ``attach`` re-prefills what is lost."""
        kv, self.kv = self.kv, None
        if self.phase is Phase.DECODE:
            self.resumed = True
            self.phase = Phase.PREFILL
        return kv

    # -- one step --------------------------------------------------------------------------
    def minimal_rows(self) -> int:
        """The fewest rows a useful step of this generation needs."""
        if self.phase is Phase.DECODE:
            return 1
        rest = len(self.target) - len(self.kv.cached) if self.kv else len(self.target)
        if self.resumed or rest > 1:
            return 1
        return 1 + min(len(self.draft), self.draft_cap)

    def plan(self, budget: int, chunk: int) -> list[Row]:
        """The rows this generation adds to the next forward pass (at most ``budget``).

        May finish the generation without any row (cancelled, end of generation, stop
        string, token cap): check ``done`` afterwards.
        """
        self._rows = []
        if self.done or budget <= 0 or self.kv is None:
            return []
        if self.req.cancel is not None and self.req.cancel.is_set():
            self._finish("cancelled")
            return []
        if self.phase is Phase.PREFILL:
            return self._plan_prefill(budget, chunk)
        return self._plan_decode(budget)

    def _plan_prefill(self, budget: int, chunk: int) -> list[Row]:
        assert self.kv is not None
        target = self.target
        start = len(self.kv.cached)
        rest = len(target) - start
        self._verifies_draft = False
        if self.resumed:
            n = min(rest, chunk, budget)
            return self._take(target[start:start + n], start, logits_from=None)
        part = self.draft[: self.draft_cap]
        if rest <= chunk and rest + len(part) <= budget:
            # the last chunk: prompt suffix + SSBD draft, logits from the last prompt token
            self._verifies_draft = True
            self._chunk = part
            return self._take(target[start:] + part, start, logits_from=rest - 1)
        n = min(rest - 1, chunk, budget)  # keep the last prompt token for the verify pass
        if n <= 0:
            return []
        return self._take(target[start:start + n], start, logits_from=None)

    def _plan_decode(self, budget: int) -> list[Row]:
        assert self.kv is not None and self.next_token is not None
        token = self.next_token
        if self.rt.is_eog(token):
            self._finish("stop")
            return []
        if self._emit(token):
            self._finish(self.result.finish_reason)
            return []
        if len(self.kv.cached) + 1 >= self.rt.n_ctx:
            self._finish("length")
            return []
        if self._pending:
            self._proposal, self._source = self._pending_part(budget - 1), SSBD
        else:
            self._proposal, self._source = self._propose(min(budget - 1, self.proposal_cap))
        return self._take([token, *self._proposal], len(self.kv.cached), logits_from=0)

    def _pending_part(self, room: int) -> list[int]:
        """The next part of a draft verified in parts (see ``draft_cap``)."""
        assert self.kv is not None
        k = min(self.draft_cap, room, self.max_tokens - len(self.out),
                self.rt.n_ctx - len(self.kv.cached) - 2)
        return self._pending[: max(0, k)]

    def _propose(self, room: int) -> tuple[list[int], str]:
        req = self.req
        if req.drafters is None or req.draft_budget <= 0 or self.kv is None:
            return [], ""
        k = min(req.draft_budget, room, self.max_tokens - len(self.out),
                self.rt.n_ctx - len(self.kv.cached) - 2)
        if k <= 0:
            return [], ""
        ctx = DraftContext(history=self.out, prompt=self.prompt, previous=req.previous)
        t0 = time.perf_counter()
        prop = req.drafters.propose_from(ctx, k)
        self.timing.drafters_ms += (time.perf_counter() - t0) * 1000
        tokens = list(prop.tokens)[:k]
        # a table built for another vocabulary (a full model's against a trimmed one) could
        # name ids this model lacks; llama.cpp aborts on those, so the draft ends there
        n_vocab = self.rt.n_vocab
        valid = next((i for i, t in enumerate(tokens) if not 0 <= t < n_vocab), len(tokens))
        return tokens[:valid], prop.source

    def _take(self, tokens: list[int], start: int, logits_from: int | None) -> list[Row]:
        self._rows = tokens
        first = len(tokens) if logits_from is None else logits_from
        return [(tok, start + i, i >= first) for i, tok in enumerate(tokens)]

    def absorb(self, row_at: Callable[[int], np.ndarray], base: int) -> None:
        """Read this generation's logits rows of the step just decoded (batch offset
        ``base``) and advance: verify drafts, cut the KV cache, pick the next token."""
        assert self.kv is not None
        if not self._rows:
            return
        self.steps += 1
        self.result.forward_passes += 1
        self.kv.cached.extend(self._rows)
        if self.phase is Phase.PREFILL:
            self._absorb_prefill(row_at, base)
        else:
            self._absorb_decode(row_at, base)
        self._rows = []

    def _absorb_prefill(self, row_at: Callable[[int], np.ndarray], base: int) -> None:
        assert self.kv is not None
        if self.resumed:
            if len(self.kv.cached) == len(self.target):
                self.phase = Phase.DECODE  # the pending next token is still the right one
            return
        if not self._verifies_draft:
            return
        part = self._chunk
        first = base + len(self._rows) - len(part) - 1
        self.result.prompt_ms = (time.perf_counter() - self.t_start) * 1000
        if self.max_tokens == 0:
            self.kv.truncate(len(self.prompt))
            self._finish("length")
            return
        accepted, done = self._verify_draft_part(lambda i: row_at(first + i), part, 0)
        self.kv.truncate(len(self.prompt) + accepted)
        self.phase = Phase.DECODE
        if done:
            self._finish(self.result.finish_reason)
        else:
            self._end_if_last()

    def _draft_beta(self, i: int) -> float:
        """The bias of the SSBD draft's token ``i``."""
        return self.req.beta if i < self.bias_limit else 0.0

    def _verify_draft_part(self, row: Callable[[int], np.ndarray], part: list[int],
                           at: int) -> tuple[int, bool]:
        """Verify ``part``, the SSBD draft from its index ``at`` on; what follows it waits
        in ``_pending``. The row after ``part`` is read as the whole draft's pass would read
        it: with the draft's next token (and its bias) when there is one, so a draft
        verified in parts is accepted exactly as far as one verified at once."""
        end = at + len(part)
        look = self.draft[end] if end < len(self.draft) else None
        accepted, done = self._verify(row, part, lambda i: self._draft_beta(at + i), look)
        reached = accepted == len(part) and not done and look is not None
        kept = reached and self.next_token == look
        self.result.drafts.add(SSBD, len(part) + reached, accepted + kept)
        self._pending = self.draft[end + 1:] if kept else []
        self._pending_at = end + 1
        self._draft_ended = kept and not self._pending
        return accepted, done

    def _absorb_decode(self, row_at: Callable[[int], np.ndarray], base: int) -> None:
        assert self.kv is not None
        proposal = self._proposal
        if self._source == SSBD:
            accepted, done = self._verify_draft_part(
                lambda i: row_at(base + i), proposal, self._pending_at)
            self._finish_step(proposal, accepted, done)
            return
        beta = self.req.drafter_beta.get(self._source, 0.0) if proposal else 0.0
        after_draft, self._draft_ended = self._draft_ended, False
        accepted, done = self._verify(lambda i: row_at(base + i), proposal,
                                      lambda i: 0.0 if after_draft and i == 0 else beta)
        if proposal:
            self.result.drafts.add(self._source, len(proposal), accepted)
            record = getattr(self.req.drafters, "record", None)
            if record is not None:
                record(len(proposal), accepted)
        self._finish_step(proposal, accepted, done)

    def _finish_step(self, proposal: list[int], accepted: int, done: bool) -> None:
        assert self.kv is not None
        self.kv.truncate(len(self.kv.cached) - (len(proposal) - accepted))
        self._proposal, self._source = [], ""
        if done:
            self._finish(self.result.finish_reason)
        else:
            self._end_if_last()

    def _end_if_last(self) -> None:
        """End now when the token just chosen ends the generation (end of generation, a
        stop string, the token cap, a loop), as ``_plan_decode`` would at the next step.

        Why now: a generation that ends at planning time is handed back only after the
        step it planned nothing for, which with other sequences in the batch is one more
        whole forward pass (measured at 8 speakers: 60-115 ms an update). The output and
        its finish reason are the same either way."""
        token = self.next_token
        if token is None or self.done:
            return
        if self.rt.is_eog(token):
            self._finish("stop")
            return
        ends = (len(self.out) + 1 >= self.max_tokens
                or self.stream.would_stop(self.rt.token_bytes(token))
                or (self.req.stop_on_loop and ends_in_loop([*self.out, token])))
        if ends and self._emit(token):
            self._finish(self.result.finish_reason)

    # -- verification and output -----------------------------------------------------------
    def _verify(self, row: Callable[[int], np.ndarray], proposal: list[int],
                beta_at: Callable[[int], float],
                lookahead: int | None = None) -> tuple[int, bool]:
        """Accept ``proposal`` up to its first mismatch (the one verify routine).

        ``row(i)`` holds the logits predicting ``proposal[i]``; ``row(len(proposal))`` the
        token after a fully accepted proposal, which is the model's own choice, unbiased:
        a draft's end is no evidence that the translation ends there. Only a draft that
        goes on past ``proposal`` names that token (``lookahead``, chosen with its bias
        ``beta_at(len(proposal))``). Returns (accepted, generation finished); leaves the
        model's next token in ``next_token``.
        """
        self.next_token = None
        for i, token in enumerate(proposal):
            chosen = self._choose(row(i), token, beta_at(i))
            if chosen != token:
                self.next_token = chosen
                return i, False
            if self._emit(token):
                return i + 1, True
        n = len(proposal)
        self.next_token = self._choose(row(n), lookahead,
                                       0.0 if lookahead is None else beta_at(n))
        return n, False

    def _choose(self, row: np.ndarray, draft_token: int | None, beta: float) -> int:
        allowed = self.req.first_token if not self.out else None
        if allowed is None:
            return self._choose_any(row, draft_token, beta)
        # the output's first token, from those the request allows: the best of them, as
        # ``_choose_any`` ranks them (a draft token it does not allow is no draft)
        if draft_token is not None and not allowed(draft_token):
            draft_token, beta = None, 0.0
        masked = row
        while True:
            chosen = self._choose_any(masked, draft_token, beta)
            if allowed(chosen):
                return chosen
            if masked is row:
                masked = np.array(row, dtype=np.float32)  # the row is the context's own
            masked[chosen] = -np.inf
            if chosen == draft_token:
                draft_token, beta = None, 0.0

    def _choose_any(self, row: np.ndarray, draft_token: int | None, beta: float) -> int:
        if self.rng is not None:
            return sampled(row, draft_token, beta, self.req.temperature, self.rng)
        if draft_token is None:
            return greedy(row)
        return biased_greedy(row, draft_token, beta, self.selection)

    def _emit(self, token: int) -> bool:
        """Append one token to the output; True when generation must end here."""
        data = self.rt.token_bytes(token)
        if self.req.give_up is not None and self.out and data[:1].isspace():
            # a new word begins: the words before it are complete
            reason = self.req.give_up(self.stream.text)
            if reason is not None:
                self.result.finish_reason = "stop"
                self.result.gave_up = reason
                return True
        self.out.append(token)
        t0 = time.perf_counter()
        delta = self.stream.feed(data)
        self.timing.detokenize_ms += (time.perf_counter() - t0) * 1000
        if delta and self.req.on_text is not None:
            self.req.on_text(delta)
        if self.stream.stopped:
            self.out.pop()  # the stop token is not part of the translation (nor of a draft)
            self.result.finish_reason = "stop"
            return True
        if len(self.out) >= self.max_tokens:
            self.result.finish_reason = "length"
            return True
        if self.req.stop_on_loop and ends_in_loop(self.out):
            self.result.finish_reason = "stop"
            self.result.looped = True
            return True
        return False

    def _finish(self, reason: str) -> None:
        self.result.finish_reason = reason
        tail = self.stream.finish()
        if tail and self.req.on_text is not None:
            self.req.on_text(tail)
        self.result.text = self.stream.text
        self.result.lse_computed = self.selection.lse_computed
        now = time.perf_counter()
        self.result.decode_ms = (now - self.t_start) * 1000
        self.timing.done = now
        self.phase = Phase.DONE

    def fail(self, reason: str = "cancelled") -> None:
        """End without another step (cancelled while waiting, or the server stopping)."""
        if not self.done:
            self._finish(reason)
