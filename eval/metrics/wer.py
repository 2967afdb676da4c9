"""Word error rate of recognised speech against reference sentences (jiwer).

Recognisers disagree on everything but the words: Whisper writes ``Dr. Smith's 9:30 talk.``
with capitals and punctuation, PocketSphinx ``doctor smith's nine thirty talk`` in lower
case (``app.speech.pocketsphinx.tidy`` adds a capital and a full stop). So both sides are normalised
alike before they are compared (``normalise``): Unicode NFKC, lower case, typographic
apostrophes made plain, hyphens, dashes and slashes made spaces (``ninety-five`` is two
words, as PocketSphinx writes it), then every character that is not a letter, a digit or an
apostrophe inside a word is dropped. Numbers are *not* spelled out: a reference's ``1995``
against a recogniser's ``nineteen ninety five`` counts as errors, which is what a caption
reader sees too.

The corpus score joins each side's texts before aligning them, so a recogniser that splits
one sentence into two finals, or merges two, is scored on its words, not on where it cut.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import jiwer

from eval.metrics.base import Metric, Score

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_SEPARATORS = re.compile(r"[-\u2010-\u2015/]")
_NOT_WORD = re.compile(r"[^\w']|_")
_LOOSE_APOSTROPHE = re.compile(r"(?<!\w)'|'(?!\w)")


def normalise(text: str) -> str:
    """``text`` as lower-case words separated by single spaces (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_APOSTROPHES)
    text = _NOT_WORD.sub(" ", _SEPARATORS.sub(" ", text))
    return " ".join(_LOOSE_APOSTROPHE.sub(" ", text).split())


class WordErrorRate(Metric):
    """(substitutions + deletions + insertions) / reference words, over a whole corpus."""

    name = "wer"

    def signature_fields(self) -> dict[str, object]:
        return {"norm": "nfkc-lc-nopunct-hyphen2space", "numbers": "as-written",
                "agg": "joined-corpus", "impl": f"jiwer-{_jiwer_version()}"}

    def counts(self, references: Sequence[str], hypotheses: Sequence[str]) -> dict[str, int]:
        """Edit counts of the joined hypotheses against the joined references."""
        ref = normalise(" ".join(references))
        hyp = normalise(" ".join(hypotheses))
        if not ref:
            raise ValueError("no reference words to score against")
        out = jiwer.process_words(ref, hyp)
        return {"reference_words": out.hits + out.substitutions + out.deletions,
                "substitutions": out.substitutions, "deletions": out.deletions,
                "insertions": out.insertions}

    def corpus_score(self, references: Sequence[str], hypotheses: Sequence[str]) -> Score:
        c = self.counts(references, hypotheses)
        errors = c["substitutions"] + c["deletions"] + c["insertions"]
        return Score(self.name, errors / c["reference_words"], self.get_signature())


def sentence_wer(reference: str, hypothesis: str) -> float | None:
    """One sentence's WER (None for a reference without words)."""
    ref = normalise(reference)
    return jiwer.wer(ref, normalise(hypothesis)) if ref else None


def _jiwer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jiwer")
    except PackageNotFoundError:  # pragma: no cover - imported above, so installed
        return "unknown"
