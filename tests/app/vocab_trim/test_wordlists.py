"""The built-in counting text: wordfreq's commonest words, in the forms running text has."""

from __future__ import annotations

import pytest

from app.vocab_trim.wordlists import WordListError, frequency_lines, word_forms


def test_each_word_is_counted_lower_case_and_capitalised() -> None:
    assert word_forms("zug") == ["zug", "Zug"]
    assert word_forms("über") == ["über", "Über"]
    assert word_forms("7") == ["7"] and word_forms("的") == ["的"]


def test_german_words_with_ss_are_also_counted_with_sharp_s() -> None:
    """wordfreq case-folds: its German list has "grösser" and "spass", never "ß"."""
    assert word_forms("grösser", "de") == ["grösser", "Grösser", "größer", "Größer"]
    assert word_forms("grösser", "en") == ["grösser", "Grösser"]
    words = {w for line in frequency_lines("de", 20000) for w in line.split(" ")}
    assert {"größer", "Spaß", "Straße"} <= words


def test_spaced_languages_come_many_words_a_line() -> None:
    lines = list(frequency_lines("de", 1000))
    words = [w for line in lines for w in line.split(" ")]
    assert len(lines) < 20 and "die" in words and "Die" in words
    assert 1000 < len(words) <= 4000 and len(set(words)) == len(words)


def test_spaceless_languages_come_a_word_a_line() -> None:
    lines = list(frequency_lines("ja", 500))
    assert len(lines) >= 500 and "の" in lines and all(" " not in line for line in lines)


def test_every_served_language_has_a_list() -> None:
    from app.translation.prompts import LANGUAGE_NAMES

    for lang in LANGUAGE_NAMES:
        assert len(list(frequency_lines(lang, 100))) >= 1, lang


def test_a_language_without_a_list_is_one_sentence() -> None:
    with pytest.raises(WordListError, match="no word list for 'tlh'"):
        list(frequency_lines("tlh", 10))
