"""Term accuracy: how many glossary term occurrences the finals render as the glossary says.

Per term occurrence: an entry that applies to a final's source counts as many times as its
source term occurs there (case-insensitively, on word boundaries, as ``app.translation.glossary``
decides what applies), and is held as many of those times as its target term occurs in
the final's text (at most). The entries that apply are recorded with every final of a run
with ``--glossary``, for every method alike, so a method without the glossary is scored on
the same terms: what the model writes by default.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.translation.glossary import term_pattern
from eval.metrics.base import Metric, Score


def _occurrences(text: str, term: str, word_bounded: bool) -> int:
    if word_bounded:
        return len(term_pattern(term).findall(text))
    return " ".join(text.split()).casefold().count(" ".join(term.split()).casefold())


class TermAccuracy(Metric):
    name = "TermAcc"

    def signature_fields(self) -> dict[str, object]:
        return {"unit": "occurrence", "case": "insensitive", "target": "substring"}

    def corpus_score(self, finals: Sequence[tuple[str, str, Sequence[Sequence[str]]]]) -> Score:
        """``finals``: (source, translation, [[source term, target term], ...]) each."""
        total = held = 0
        for source, text, terms in finals:
            for src_term, tgt_term in terms:
                n = _occurrences(source, src_term, True)
                total += n
                held += min(n, _occurrences(text, tgt_term, False))
        if not total:
            return Score(self.name, None, self.get_signature(), "no glossary term applied")
        return Score(self.name, held / total, self.get_signature(), f"{held}/{total}")



