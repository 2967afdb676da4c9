"""Word error rate: both recognisers' spellings normalised alike, splits and merges scored
on their words only."""

from __future__ import annotations

import pytest

from eval.metrics.wer import WordErrorRate, normalise, sentence_wer


def test_case_punctuation_and_hyphens_are_normalised_alike() -> None:
    assert normalise("Lead researchers say: it's low-income, U.S.-based!") == \
        "lead researchers say it's low income u s based"
    assert normalise("low -income") == normalise("low-income")  # Whisper's spacing
    assert normalise("It\u2019s ‘quoted’ — really") == "it's quoted really"
    assert normalise("9:30 am (0230 UTC)") == "9 30 am 0230 utc"  # numbers as written


def test_pocketsphinx_and_whisper_styles_of_one_sentence_score_zero() -> None:
    ref = "Thank you all for coming, and enjoy the rest of the conference."
    assert sentence_wer(ref, "thank you all for coming and enjoy the rest of the conference") \
        == 0.0
    assert sentence_wer(ref, "Thank you all for coming. And enjoy the rest of the conference") \
        == 0.0
    assert sentence_wer("...", "words") is None


def test_corpus_score_joins_so_a_split_or_a_merge_costs_nothing() -> None:
    refs = ["The museum is closed on Mondays.", "The garden stays open."]
    metric = WordErrorRate()
    split = metric.corpus_score(refs, ["The museum is closed", "on Mondays.",
                                       "The garden stays open."])
    merged = metric.corpus_score(refs, ["The museum is closed on Mondays the garden stays open"])
    assert split.score == merged.score == 0.0
    counts = metric.counts(refs, ["The museum was closed on Mondays.", "garden stays open now"])
    assert counts == {"reference_words": 10, "substitutions": 1, "deletions": 1,
                      "insertions": 1}
    assert metric.corpus_score(refs, []).score == 1.0  # nothing heard: every word deleted


def test_signature_names_the_normalisation() -> None:
    sig = WordErrorRate().signature
    assert sig.startswith("wer|norm:") and "numbers:as-written" in sig and "jiwer-" in sig
    with pytest.raises(ValueError):
        WordErrorRate().corpus_score(["..."], ["words"])
