import pytest

from eval.metrics.latency import LAAL, laal, stable_since


def test_stable_since_counts_only_words_that_stayed() -> None:
    outputs = [["A"], ["A", "x"], ["A", "B"], ["A", "B", "C"]]
    assert stable_since(outputs) == [0, 2, 3]


def test_laal_on_a_toy_stream() -> None:
    # source of 6 words read 2 at a time; final output 3 words equal to the reference length
    outputs = [["A"], ["A", "x"], ["A", "B", "C"]]
    read = [2, 4, 6]
    # delays: A stable from update 0 (2 words read), B and C from update 2 (6 words read);
    # tau = 2 (the first delay reaching |X| = 6); rate = 6 / 3 = 2
    # LAAL = ((2 - 0) + (6 - 2)) / 2 = 3
    assert laal(outputs, read, 6, reference_len=3) == pytest.approx(3.0)
    # a longer reference lowers the rate: 6 / 4 = 1.5 -> ((2 - 0) + (6 - 1.5)) / 2
    assert laal(outputs, read, 6, reference_len=4) == pytest.approx(3.25)


def test_corpus_laal_tokenizes_in_its_unit_and_averages_streams() -> None:
    metric = LAAL("word")
    assert metric.signature == ("laal|delay:source-words-read-when-word-stabilized|target:word"
                                "|rate:max(hyp,ref)|agg:mean-over-streams")
    texts = [["A", "A x", "A B C"], ["", ""]]  # the second stream never outputs: no LAAL
    score = metric.corpus_score(texts, [[2, 4, 6], [3, 5]], ["r r r", None])
    assert score.score == pytest.approx(3.0)
    # zh in characters: one "word" per character, not one per sentence
    zh = ([["天", "天气"]], [[1, 2]], [None])
    assert LAAL("char").corpus_score(*zh).score == pytest.approx(1.0)
    assert LAAL("word").corpus_score(*zh).score == pytest.approx(2.0)
    assert LAAL().corpus_score([], [], []).score is None
