"""A direction's prompt prefix: what every prompt of it starts with, and nothing more."""

from __future__ import annotations

from app.translation.prompts import FewShotFormat
from app.translation.prompts.examples import FEW_SHOT_EXAMPLES
from app.translation.prompts.parts import tokenize_prompt
from app.translation.prompts.prefixes import direction_prefix, served_directions


def _chars(text: str, bos: bool, special: bool) -> list[int]:
    """A tokenizer with one id per character (and 0 for BOS)."""
    return ([0] if bos else []) + [ord(c) for c in text]


def test_every_prompt_of_the_direction_starts_with_it_and_it_ends_before_the_source():
    fmt = FewShotFormat()
    prefix = direction_prefix(fmt, "en", "de", _chars)
    for source in ("Hello", "zebra crossing", "Ärger", "1999"):
        tokens = tokenize_prompt(fmt.translation(source, "en", "de"), _chars)
        assert tokens[: len(prefix)] == prefix
    assert "German" in "".join(map(chr, prefix[1:]))
    text = "".join(map(chr, prefix[1:]))
    assert not text.endswith(("a", "z"))


def test_directions_differ():
    fmt = FewShotFormat()
    assert direction_prefix(fmt, "en", "de", _chars) != direction_prefix(fmt, "de", "en", _chars)


def test_served_directions_are_the_ordered_pairs_the_format_knows():
    assert served_directions(["en", "de", "xx", "en"], FEW_SHOT_EXAMPLES) == [
        ("en", "de"), ("de", "en")]
    assert served_directions(["en"], FEW_SHOT_EXAMPLES) == []
