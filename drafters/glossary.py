"""Glossary drafters: the target term proposed where the translation begins it.

An organiser's glossary says which target term a source term must become
(``app.translation.glossary``).
Shown in the prompt, a small model still writes its own word; so the term is also a draft:

* ``GlossaryContinuation`` (``"glossary"``): once the output ends with the beginning of a
  target term (at least ``min_chars`` characters at the start of a word, compared as text
  and case-insensitively; two characters anywhere for a Han, kana or Hangul term), the rest
  of the term is proposed. The engine verifies it with
  the glossary's own bias (``GenerationRequest.drafter_beta``), so a term the model has
  begun is written as the glossary spells it. Text, not tokens: the model writes
  " Aufmerksamkeit" as one token where the term " Aufmerksamkeitsmechanismus" tokenizes as
  " Auf" "merksam" "keits" ..., so a token-prefix match would never fire.
* ``GlossaryStart`` (``"glossary_start"``): proposes a whole target term that is not in the
  output yet, at every step. Verified with a milder bias, it is taken where the model
  already ranks the term's first token close to its own choice. It is what a final that
  missed a term is repaired with (a second decode), not the first attempt: proposed at
  every step it would crowd out the other drafters.

The drafters get the model's tokenizer and detokenizer as plain functions (they load no
model); what they propose is verified like any draft, so a wrong proposal costs a row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from drafters.base import DraftContext
from drafters.scripts import dense, unspaced

Tokenize = Callable[[str], list[int]]
Detokenize = Callable[[list[int]], str]


DENSE_MIN_CHARS = 2  # Han, kana, Hangul: two characters of a term are already a cue


def _min_chars(term: str, min_chars: int) -> int:
    """How many first characters of ``term`` the output must end with before the rest is
    proposed: fewer for a term in a dense script (``drafters.scripts.dense``)."""
    return min(min_chars, DENSE_MIN_CHARS) if term and dense(term[0]) else min_chars


def _remainder(tail: str, term: str, min_chars: int) -> tuple[str, int] | None:
    """The rest of ``term`` when ``tail`` ends with its first characters (at least
    ``min_chars``, starting a word), and how many matched; None otherwise. A term in a
    script without spaces starts wherever it stands ("機械翻訳" after "私は")."""
    folded_tail, folded = tail.casefold(), term.casefold()
    needs_word_start = not unspaced(term[:1])
    for j in range(len(term) - 1, min_chars - 1, -1):
        if folded_tail.endswith(folded[:j]):
            before = tail[:len(tail) - j]
            if not needs_word_start or not before or not before[-1].isalnum():
                return term[j:], j
    return None


class GlossaryContinuation:
    """Proposes the rest of a target term whose beginning ends the output."""

    name = "glossary"

    def __init__(self, terms: Sequence[str], tokenize: Tokenize, detokenize: Detokenize,
                 min_chars: int = 4, window: int = 24) -> None:
        self.terms = [t for t in terms if len(t) > _min_chars(t, min_chars)]
        self.tokenize = tokenize
        self.detokenize = detokenize
        self.min_chars = min_chars
        self.window = window  # tokens of the output looked at (terms are short)
        self._ids: dict[str, list[int]] = {}

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        if not ctx.history or not self.terms:
            return []
        tail = self.detokenize(list(ctx.history[-self.window:]))
        best: tuple[str, int] | None = None
        for term in self.terms:
            found = _remainder(tail, term, _min_chars(term, self.min_chars))
            if found is not None and (best is None or found[1] > best[1]):
                best = found
        if best is None:
            return []
        rest = best[0]
        if rest not in self._ids:
            self._ids[rest] = self.tokenize(rest)
        return self._ids[rest][:k]


class GlossaryStart:
    """Proposes a whole target term not yet in the output (for repairing a final)."""

    name = "glossary_start"

    def __init__(self, terms: Sequence[str], tokenize: Tokenize,
                 detokenize: Detokenize) -> None:
        self.terms = list(terms)
        self.detokenize = detokenize
        # in a sentence a term follows a space (the form the model's tokens take), except
        # in scripts written without spaces
        self.ids = {t: tokenize(t if unspaced(t[:1]) else " " + t) for t in terms}

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        out = " ".join(self.detokenize(list(ctx.history)).split()).casefold()
        for term in self.terms:
            if " ".join(term.split()).casefold() not in out:
                return self.ids[term][:k]
        return []
