"""Plain help: every default that means something is shown, "not set" is not."""

from __future__ import annotations

import argparse

from app.usage import PlainHelp


def _help(**defaults: object) -> str:
    ap = argparse.ArgumentParser(prog="x", formatter_class=PlainHelp)
    for name, default in defaults.items():
        ap.add_argument(f"--{name}", default=default, help=f"the {name}")
    return ap.format_help()


def test_zero_is_shown_and_unset_defaults_are_not() -> None:
    text = _help(offset=0, lag=3, drafters="", model=None, verbose=False)
    assert "the offset (default: 0)" in text and "the lag (default: 3)" in text
    assert "default: )" not in text and "default: None" not in text
    assert "default: False" not in text


def test_comma_list_checks_every_item_and_keeps_the_text() -> None:
    import pytest

    from app.usage import comma_list, count, fraction, positive_int

    assert comma_list(positive_int, "a positive number")("1,2, 4") == "1,2, 4"
    assert comma_list(count)("") == ""  # an empty list is a list
    with pytest.raises(argparse.ArgumentTypeError, match="'0' is not a positive number"):
        comma_list(positive_int, "a positive number")("1,0")
    with pytest.raises(argparse.ArgumentTypeError, match="'1.0' is not a beta"):
        comma_list(fraction, "a beta")("0.2,1.0")
    with pytest.raises(argparse.ArgumentTypeError, match="'x' is not one of a, b"):
        comma_list(choices=("a", "b"))("a,x")
    chains = comma_list(comma_list(choices=("ngram", "dictionary")), "chains", sep=";")
    assert chains("ngram;ngram,dictionary") == "ngram;ngram,dictionary"
    with pytest.raises(argparse.ArgumentTypeError, match="'trie' is not one of"):
        chains("ngram;trie")
