"""Term accuracy counts term occurrences, in any case, in compounds too."""

from __future__ import annotations

from eval.metrics.terms import TermAccuracy


def test_each_occurrence_of_an_applied_term_counts() -> None:
    finals = [
        ("The model and the model.", "Das Modell und das Sprachmodell.", [["model", "Modell"]]),
        ("A GPU, not a laptop.", "Eine GPU, kein Laptop.",
         [["GPU", "Grafikprozessor"], ["laptop", "Laptop"]]),
    ]
    score = TermAccuracy().corpus_score(finals)
    assert score.score == 3 / 4 and score.note == "3/4"
    assert "TermAcc|unit:occurrence" in TermAccuracy().signature


def test_no_applied_term_is_no_score() -> None:
    score = TermAccuracy().corpus_score([("Hello.", "Hallo.", [])])
    assert score.score is None and "no glossary term" in score.note
