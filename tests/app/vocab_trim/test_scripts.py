"""Classing characters and tokens by writing system."""

from __future__ import annotations

from app.vocab_trim.scripts import char_class, scripts_of, token_fits


def test_letters_are_classed_by_script() -> None:
    assert char_class("a") == char_class("ß") == char_class("é") == "LATIN"
    assert char_class("ж") == "CYRILLIC"
    assert char_class("語") == "CJK"
    assert char_class("の") == "HIRAGANA" and char_class("カ") == "KATAKANA"
    assert char_class("ש") == "HEBREW" and char_class("ع") == "ARABIC"


def test_digits_spaces_and_common_punctuation_are_neutral() -> None:
    assert all(char_class(c) == "NEUTRAL" for c in "▁09.,;:!?\"'()-–—“”€")
    assert char_class("。") == char_class("，") == "CJK_PUNCTUATION"
    assert char_class("😀") == char_class("→") == "OTHER"


def test_a_token_fits_when_every_character_is_neutral_or_of_the_scripts() -> None:
    latin = scripts_of(["en", "de"])
    assert token_fits("▁Straße", latin) and token_fits("▁2024,", latin)
    assert not token_fits("▁дом", latin) and not token_fits("日本", latin)
    assert not token_fits("。", latin)
    ja = scripts_of(["ja"])
    assert token_fits("日本語。", ja) and token_fits("カタカナ", ja)
    assert not token_fits("▁Hello", ja)
    assert token_fits("▁Hello", scripts_of(["en", "ja"]))
