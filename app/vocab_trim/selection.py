"""Which tokens a vocabulary for some languages keeps, and why each one.

Reasons, in the order they are applied (a token counts under the first that keeps it):

- ``special``: every token that is not a normal text piece (control, user-defined, byte,
  unknown), except Gemma's ``<unusedN>`` placeholders, which no text or template produces.
  Byte tokens are what lets any text outside the kept set still tokenize.
- ``seen``: every token the model's own tokenizer produced on the counting corpora (text in
  the served languages; the prompts' own text is always counted too).
- ``frequent``: the ``top`` highest-ranked normal tokens of the vocabulary (its scores are
  the tokenizer's merge ranks, a frequency order over the model's whole training text) that
  are written in the served languages' scripts. The corpora cannot hold every word a speaker
  will say; this keeps the common pieces they lack (names, rare words) whole.
- ``character``: every single-character token of the served scripts, so a word the set
  lacks is spelled in characters of its script, not in bytes.
- ``neutral`` (only when asked: ``serve --langs``'s copy, which has no corpus): every
  token made only of characters no script owns (digits, punctuation, symbols: ``?“``,
  ``(%)``), which text of any language may hold; a few thousand tokens.
- ``merge``: the pieces that merging passes through on the way to a kept token
  (``spm_merges``); without them the tokenizer could not produce the kept token.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from app.vocab_trim.scripts import WORD_START, token_fits
from app.vocab_trim.spm_merges import merge_closure

# llama.cpp's token types (llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_PLACEHOLDER = re.compile(r"<unused\d+>")
REASONS = ("special", "seen", "frequent", "character", "neutral", "merge")


@dataclass(frozen=True)
class TokenTable:
    """A GGUF tokenizer's per-token arrays (``tokenizer.ggml.tokens/scores/token_type``)."""

    tokens: list[str]
    scores: np.ndarray
    types: np.ndarray

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass
class Selection:
    """The kept token ids (ascending: the trimmed file keeps the original order) and how
    many tokens each reason kept."""

    keep: np.ndarray
    kept_by: Counter[str] = field(default_factory=Counter)

    @property
    def size(self) -> int:
        return int(len(self.keep))


def select_tokens(table: TokenTable, seen_counts: np.ndarray, scripts: frozenset[str],
                  top: int, min_count: int = 1,
                  always: list[int] | None = None, neutral: bool = False) -> Selection:
    """Keep what text in ``scripts`` needs (module docstring); ``seen_counts[i]`` is how
    often token ``i`` occurred in the counting corpora; ``always`` are ids kept as
    ``special`` whatever their type (the ids the model's metadata names); ``neutral``:
    keep every all-neutral token too."""
    n = len(table)
    reason = np.full(n, "", dtype=object)
    normal = table.types == NORMAL

    def mark(ids: np.ndarray, why: str) -> None:
        fresh = ids[reason[ids] == ""]
        reason[fresh] = why

    special = np.flatnonzero(~normal & (table.types != UNUSED))
    special = np.array([i for i in special if not _PLACEHOLDER.fullmatch(table.tokens[i])],
                       dtype=np.int64)
    mark(np.union1d(special, np.asarray(always or [], dtype=np.int64)), "special")
    mark(np.flatnonzero(normal & (seen_counts >= min_count)), "seen")

    fits = np.array([normal[i] and token_fits(t, scripts) for i, t in enumerate(table.tokens)])
    ranked = np.flatnonzero(fits)[np.argsort(-table.scores[fits], kind="stable")]
    mark(ranked[:top], "frequent")
    singles = np.array([i for i in np.flatnonzero(fits)
                        if len(table.tokens[i].replace(WORD_START, "")) <= 1], dtype=np.int64)
    mark(singles, "character")
    if neutral:
        none = frozenset()
        mark(np.array([i for i in np.flatnonzero(fits) if token_fits(table.tokens[i], none)],
                      dtype=np.int64), "neutral")

    kept_normal = [table.tokens[i] for i in np.flatnonzero((reason != "") & normal)]
    scores = {t: float(s) for t, s, ok in zip(table.tokens, table.scores, normal, strict=True)
              if ok}
    pieces = merge_closure(kept_normal, scores)
    index = {t: i for i, t in enumerate(table.tokens) if normal[i]}
    mark(np.array(sorted(index[p] for p in pieces if p in index), dtype=np.int64), "merge")

    keep = np.flatnonzero(reason != "")
    return Selection(keep=keep, kept_by=Counter(str(r) for r in reason[keep]))


def coverage(counts: np.ndarray, keep: np.ndarray) -> float:
    """The share of counted token occurrences that the kept set holds (1.0: every token the
    full tokenizer produced on that text is kept)."""
    total = int(counts.sum())
    return float(counts[keep].sum() / total) if total else 1.0
