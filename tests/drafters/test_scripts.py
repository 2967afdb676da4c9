"""Which characters belong to scripts written without spaces between words."""

from __future__ import annotations

import pytest

from drafters.scripts import dense, spaced_word_char, unspaced


@pytest.mark.parametrize("char", ["機", "の", "ア", "语", "기", "ก", "က", "ក"])
def test_scripts_without_spaces(char: str) -> None:
    assert unspaced(char) and not spaced_word_char(char)


@pytest.mark.parametrize("char", ["a", "Ü", "я", "ع", "अ", "7"])
def test_letters_and_digits_of_spaced_scripts(char: str) -> None:
    assert spaced_word_char(char) and not unspaced(char) and not dense(char)


def test_dense_scripts_and_what_is_no_letter() -> None:
    assert dense("機") and dense("の") and dense("기") and not dense("ก")
    assert not spaced_word_char(" ") and not spaced_word_char("-") and not unspaced("")
