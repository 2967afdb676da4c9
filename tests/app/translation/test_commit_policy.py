"""The append-only commit policy (app/translation/commit_policy.py), on a toy vocabulary."""

from __future__ import annotations

import pytest

from app.translation.commit_policy import (
    SegmentCommits,
    final_with_prefix,
    stable_length,
    starts_word,
    token_text,
)

VOCAB: dict[int, bytes] = {
    1: b" Der", 2: b" Hund", 3: b"es", 4: b" l\xc3\xa4uft", 5: b".", 6: b" schnell",
    7: b" Die", 8: b" Katze", 9: b",", 10: b" und",
    # Japanese: one character in one token, and one split over two tokens
    20: "犬".encode(), 21: "が".encode(), 22: "走".encode()[:2], 23: "走".encode()[2:],
    24: "る".encode(), 25: "。".encode(),
}


def piece(token: int) -> bytes:
    return VOCAB[token]


def commits(mask_k: int = 1, unit: str = "word") -> SegmentCommits:
    return SegmentCommits(piece, unit=unit, mask_k=mask_k)  # type: ignore[arg-type]


def test_starts_word() -> None:
    assert starts_word(b" Hund", "word")
    assert not starts_word(b"es", "word")
    assert not starts_word(b",", "word")
    assert starts_word("犬".encode(), "char")
    assert not starts_word("走".encode()[2:], "char")  # a continuation byte
    assert not starts_word(b"", "word")


def test_token_text_refuses_half_a_character() -> None:
    assert token_text([20, 21], piece) == "犬が"
    assert token_text([20, 22], piece) is None


def test_stable_length_needs_agreement_on_the_next_word() -> None:
    def boundary_of(tokens: list[int]):  # noqa: ANN202
        return lambda i: starts_word(piece(tokens[i]), "word")

    cur = [1, 2, 4, 6, 5]
    # both agree on " Der Hund läuft": "Der Hund" is stable (the next word agreed begins)
    assert stable_length([1, 2, 4, 5], cur, 0, 0, boundary_of(cur)) == 2
    # the previous output went on "Hund|es": the word "Hund" is not agreed as a word
    prev = [1, 2, 3, 5]
    assert stable_length(prev, cur, 0, 0, boundary_of(cur)) == 1
    # the mask keeps the last tokens uncommitted
    assert stable_length([1, 2, 4, 6, 5], cur, 0, 3, boundary_of(cur)) == 2
    # nothing agreed: what is committed stays
    assert stable_length([7, 8], cur, 0, 0, boundary_of(cur)) == 0


def test_first_output_commits_nothing_then_agreement_commits_words() -> None:
    seg = commits(mask_k=1)
    assert seg.partial([1, 2, 5]) is None  # nothing to agree with yet
    step = seg.partial([1, 2, 4, 5])
    assert step is not None and (step.text, step.delta) == ("Der", "Der")
    assert seg.forced() == [1]
    # "läuft" is agreed, but not where it ends ("läuft." before, "läuft schnell" now)
    step = seg.partial([1, 2, 4, 6, 5])
    assert step is not None and (step.text, step.delta) == ("Der Hund", " Hund")
    step = seg.partial([1, 2, 4, 6, 5])
    assert step is not None and (step.text, step.delta) == ("Der Hund läuft", " läuft")
    assert seg.forced() == [1, 2, 4]
    assert seg.partial([1, 2, 4, 6, 5]) is None  # the mask hides " schnell" and "."


def test_deltas_concatenate_to_the_text_and_never_revise() -> None:
    seg = commits(mask_k=0)
    outputs = [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 6, 5], [1, 2, 3, 4, 6, 10, 5]]
    joined, texts = "", []
    for out in outputs:
        step = seg.partial(out)
        if step is not None:
            assert step.text == joined + step.delta
            joined = step.text
            texts.append(step.text)
    final = seg.final("Der Hundes läuft schnell und.")
    assert final.final and final.text == joined + final.delta
    assert all(final.text.startswith(t) for t in texts)
    assert texts == ["Der", "Der Hundes", "Der Hundes läuft"]


def test_an_output_without_the_committed_prefix_commits_nothing() -> None:
    seg = commits(mask_k=0)
    seg.partial([1, 2, 4, 5])
    assert seg.partial([1, 2, 4, 6, 5]) is not None
    assert seg.partial([7, 8, 9, 10, 5]) is None
    assert seg.text == "Der Hund"


def test_characters_commit_whole_characters_only() -> None:
    seg = commits(mask_k=0, unit="char")
    seg.partial([20, 21, 22, 23, 25])
    step = seg.partial([20, 21, 22, 23, 24, 25])
    # "犬が走" is agreed, but what follows it is not: never up to half of "走"
    assert step is not None and step.text == "犬が"
    step = seg.partial([20, 21, 22, 23, 24, 25])
    assert step is not None and step.text == "犬が走る" and step.delta == "走る"


def test_final_starts_with_the_committed_text() -> None:
    seg = commits(mask_k=0)
    seg.partial([1, 2, 4, 5])
    seg.partial([1, 2, 4, 6, 5])
    step = seg.final("Der Hund läuft schnell.")
    assert (step.text, step.delta, step.final) == ("Der Hund läuft schnell.",
                                                   " läuft schnell.", True)
    assert seg.partial([1, 2, 4, 6, 10, 5]) is None  # nothing after the final


@pytest.mark.parametrize(("committed", "final", "unit", "expected"), [
    ("Der Hund", "Der Hund läuft.", "word", "Der Hund läuft."),
    ("Der Hund", "Die Katze läuft.", "word", "Der Hund läuft."),
    ("Der Hund", "Die Katzen", "word", "Der Hund"),
    ("Der Hund", "", "word", "Der Hund"),
    ("", "  Die Katze. ", "word", "Die Katze."),
    ("犬が", "猫が走る。", "char", "犬が走る。"),
])
def test_the_committed_prefix_wins(committed: str, final: str, unit: str,
                                   expected: str) -> None:
    assert final_with_prefix(committed, final, unit) == expected  # type: ignore[arg-type]


def test_an_unfit_output_leaves_nothing_to_agree_with() -> None:
    seg = commits(mask_k=0)
    seg.partial([1, 2, 4, 5])
    seg.unfit()  # e.g. a loop: the next output must agree with a fit one
    assert seg.partial([1, 2, 4, 6, 5]) is None
    step = seg.partial([1, 2, 4, 6, 5])
    assert step is not None and step.text == "Der Hund läuft"
