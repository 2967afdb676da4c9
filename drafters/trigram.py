"""Sparse trigram drafter: P(next | prev, cur), falling back to P(next | cur).

A dense table is V^3 (V = 262,144 for Gemma): impossible. Counting only the triples that
occur in the corpus, and keeping per context just its most frequent continuation, leaves a
few sorted numpy arrays: context keys, top token, top count, context total. Lookups are
binary searches.

Rules kept from the trigram-drafter write-up (seed 002):
* the context is always the last two real tokens (of history plus the tokens proposed so
  far: the proposal rolls over its own guesses), never a placeholder;
* a context seen fewer than ``min_context_count`` times falls back to the bigram row, and
  with a single token of history only the bigram applies;
* the proposal is greedy (the top continuation), so the distribution that produced it is a
  one-hot: ``q = 1`` for the proposed token, which is what speculative sampling must use.
  ``propose_with_probs`` reports the corpus probability of each guess (count / context
  total), used to stop proposing once guesses become unlikely, not as q.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drafters.base import DraftContext
from drafters.segment import leading


def _top_per_context(keys: np.ndarray, vocab_size: int):  # noqa: ANN202
    """keys = ctx * V + next, any order -> per-context (ctx, top, top_count, total)."""
    uniq, counts = np.unique(keys, return_counts=True)
    ctx = uniq // vocab_size
    nxt = (uniq % vocab_size).astype(np.int32)
    # sort by context, then by count descending: the first row of each context is its top
    order = np.lexsort((-counts, ctx))
    ctx, nxt, counts = ctx[order], nxt[order], counts[order]
    starts = np.flatnonzero(np.r_[True, ctx[1:] != ctx[:-1]])
    totals = np.add.reduceat(counts, starts)
    return ctx[starts], nxt[starts], counts[starts].astype(np.int64), totals.astype(np.int64)


class TableMismatchError(ValueError):
    """A trigram table built for another tokenizer than the model's."""


@dataclass
class TrigramDrafter:
    vocab_size: int
    tri_ctx: np.ndarray
    tri_top: np.ndarray
    tri_count: np.ndarray
    tri_total: np.ndarray
    bi_ctx: np.ndarray
    bi_top: np.ndarray
    bi_count: np.ndarray
    bi_total: np.ndarray
    min_context_count: int = 2
    min_prob: float = 0.3
    name: str = "trigram"
    tokenizer: str = ""  # the identity of the tokenizer whose ids the table holds

    @property
    def n_contexts(self) -> int:
        return int(len(self.tri_ctx))

    @property
    def n_bigrams(self) -> int:
        return int(len(self.bi_ctx))

    @classmethod
    def from_token_lines(cls, token_lines: Iterable[list[int]], vocab_size: int,
                         **kwargs) -> TrigramDrafter:
        tri_keys, bi_keys = [], []
        for toks in token_lines:
            if len(toks) < 2:
                continue
            arr = np.asarray(toks, dtype=np.int64)
            bi_keys.append(arr[:-1] * vocab_size + arr[1:])
            if len(toks) >= 3:
                tri_keys.append((arr[:-2] * vocab_size + arr[1:-1]) * vocab_size + arr[2:])
        tri = _top_per_context(np.concatenate(tri_keys) if tri_keys else
                               np.zeros(0, np.int64), vocab_size)
        bi = _top_per_context(np.concatenate(bi_keys) if bi_keys else np.zeros(0, np.int64),
                              vocab_size)
        return cls(vocab_size, *tri, *bi, **kwargs)

    def save(self, path: Path) -> None:
        with open(path, "wb") as f:
            np.savez_compressed(
                f, vocab_size=self.vocab_size, tri_ctx=self.tri_ctx, tri_top=self.tri_top,
                tri_count=self.tri_count, tri_total=self.tri_total, bi_ctx=self.bi_ctx,
                bi_top=self.bi_top, bi_count=self.bi_count, bi_total=self.bi_total,
                min_context_count=self.min_context_count, tokenizer=self.tokenizer)

    @classmethod
    def load(cls, path: Path, tokenizer_identity: str | None = None,
             vocab_size: int | None = None) -> TrigramDrafter:
        """The saved table; refused (``TableMismatchError``) when it was built for another
        tokenizer: its ids would be other tokens, or no tokens at all, of this model (a
        table of the full vocabulary against a trimmed model, ``livetrans trim-vocab``).
        Tables from before the identity was recorded are checked by vocabulary size."""
        with np.load(path) as z:
            built_for = str(z["tokenizer"]) if "tokenizer" in z.files else ""
            size = int(z["vocab_size"])
            if tokenizer_identity and built_for and built_for != tokenizer_identity:
                raise TableMismatchError(f"{path} was built for tokenizer {built_for}, "
                                         f"not {tokenizer_identity}")
            if vocab_size is not None and size != vocab_size:
                raise TableMismatchError(f"{path} was built for {size} tokens, not "
                                         f"{vocab_size}")
            return cls(size, z["tri_ctx"], z["tri_top"], z["tri_count"],
                       z["tri_total"], z["bi_ctx"], z["bi_top"], z["bi_count"], z["bi_total"],
                       min_context_count=int(z["min_context_count"]), tokenizer=built_for)

    @staticmethod
    def _find(keys: np.ndarray, key: int) -> int:
        i = int(np.searchsorted(keys, key))
        return i if i < len(keys) and int(keys[i]) == key else -1

    def next_token(self, prev: int | None, cur: int) -> tuple[int, float] | None:
        """The top continuation of (prev, cur) with its corpus probability, or None."""
        if prev is not None:
            i = self._find(self.tri_ctx, prev * self.vocab_size + cur)
            if i >= 0 and self.tri_total[i] >= self.min_context_count:
                return int(self.tri_top[i]), float(self.tri_count[i] / self.tri_total[i])
        i = self._find(self.bi_ctx, cur)
        if i >= 0:
            return int(self.bi_top[i]), float(self.bi_count[i] / self.bi_total[i])
        return None

    def propose_with_probs(self, ctx: DraftContext, k: int) -> tuple[list[int], list[float]]:
        history = list(ctx.history)
        if not history:
            return [], []
        tokens: list[int] = []
        probs: list[float] = []
        prev = history[-2] if len(history) >= 2 else None
        cur = history[-1]
        for _ in range(k):
            found = self.next_token(prev, cur)
            if found is None or found[1] < self.min_prob:
                break
            tok, p = found
            tokens.append(tok)
            probs.append(p)
            prev, cur = cur, tok
        return tokens, probs

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        return self.propose_with_probs(ctx, k)[0]


def build_trigram(lines: Iterable[str], lang: str, vocab, **kwargs) -> TrigramDrafter:  # noqa: ANN001
    lead = leading(lang)
    token_lines = (vocab.tokenize(lead + line) for line in lines)
    return TrigramDrafter.from_token_lines(token_lines, vocab.n_vocab,
                                           tokenizer=vocab.identity(), **kwargs)
