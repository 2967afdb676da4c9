"""Display policies: mask-k as the server does it, and stable's promise (never retract)."""

from __future__ import annotations

import random

import pytest

from app.translation.display import (
    MaskK,
    Stable,
    Translation,
    common_prefix,
    display_policy,
    display_unit,
    join_units,
    split_units,
)
from app.translation.translator import masked_tokens


def _partials(*texts: str) -> list[Translation]:
    return [Translation(t) for t in texts]


def test_mask_k_tokens_match_the_servers_masked_tokens() -> None:
    rng = random.Random(3)
    for _ in range(200):
        tokens = [rng.randrange(100) for _ in range(rng.randrange(12))]
        k = rng.randrange(6)
        final = rng.random() < 0.3
        assert MaskK(k).shown_tokens(tokens, final) == masked_tokens(tokens, k, final)


def test_mask_k_detokenizes_the_shown_tokens() -> None:
    vocab = {1: " Das", 2: " ist", 3: " ein", 4: " Haus", 5: "."}

    def detok(ids) -> str:  # noqa: ANN001
        return "".join(vocab[i] for i in ids)

    policy = display_policy("mask-k", 2, detokenize=detok)
    assert policy.show(Translation(" Das ist ein Haus", tokens=[1, 2, 3, 4])) == "Das ist"
    assert policy.show(Translation(" Das ist ein Haus.", True, [1, 2, 3, 4, 5])) == \
        "Das ist ein Haus."


def test_mask_k_without_tokens_masks_words_or_characters() -> None:
    assert MaskK(2).show(Translation("a b c d")) == "a b"
    assert MaskK(2).show(Translation("a b")) == ""
    assert MaskK(2).show(Translation("a b c d", final=True)) == "a b c d"
    assert MaskK(0).show(Translation(" a b ")) == "a b"
    assert MaskK(2, "char").show(Translation("我们 今天好")) == "我们 今"
    with pytest.raises(ValueError):
        MaskK(-1)


def test_stable_shows_what_two_outputs_agree_on() -> None:
    policy = Stable()
    shown = policy.show_all(_partials("Das", "Das ist ein", "Das ist eine Katze")
                            + [Translation("Das ist eine Katze.", True)])
    assert shown == ["", "Das", "Das ist", "Das ist eine Katze."]


def test_stable_never_retracts_and_waits_for_agreement() -> None:
    policy = Stable()
    assert policy.show(Translation("Er sah den Mann")) == ""
    assert policy.show(Translation("Er sah den Mann mit")) == "Er sah den Mann"
    # the model changes its mind: the two latest agree on less; the display stays
    assert policy.show(Translation("Er hat den Mann gesehen")) == "Er sah den Mann"
    # they agree on more, but it contradicts the display: still no retraction
    assert policy.show(Translation("Er hat den Mann gesehen, der")) == "Er sah den Mann"
    # the final rewrites the caption as a whole, and closes the segment
    assert policy.show(Translation("Er hat den Mann gesehen.", True)) == \
        "Er hat den Mann gesehen."
    assert policy.show(Translation("Neu")) == ""  # a new segment starts from nothing


def test_stable_reset_forgets_the_segment() -> None:
    policy = display_policy("stable")
    policy.show(Translation("a b"))
    assert policy.show(Translation("a b c")) == "a b"
    policy.reset()
    assert policy.show(Translation("a b c")) == ""
    assert isinstance(policy, Stable)
    assert policy.show(Translation("a b c")) == "a b c"  # the next two agree on everything


def test_stable_counts_characters_for_cjk() -> None:
    policy = display_policy("stable", unit=display_unit("zh"))
    assert policy.show(Translation("我们今天")) == ""
    assert policy.show(Translation("我们今年")) == "我们今"
    assert policy.show(Translation("我们今年的")) == "我们今年"


def test_units_and_factory() -> None:
    assert display_unit("ja") == "char" and display_unit("zh-Hans") == "char"
    assert display_unit("de") == "word" and display_unit(None) == "word"
    assert split_units(" 我 们 ", "char") == ["我", "们"]
    assert join_units("我 们今天", "char", 2) == "我 们"
    assert join_units("a  b c", "word", 2) == "a b" and join_units("a", "word", 0) == ""
    assert join_units("ab", "char", 5) == "ab"
    assert common_prefix(["a", "b"], ["a", "c"]) == 1
    assert isinstance(display_policy("mask-k", 3), MaskK)
    with pytest.raises(ValueError, match="unknown display mode"):
        display_policy("fancy")


def _random_segment(rng: random.Random, unit: str) -> list[Translation]:
    """A segment of random re-translations: outputs grow, keep or rewrite prefixes."""
    vocab = ["a", "b", "c", "d"] if unit == "word" else list("我们你好")
    sep = " " if unit == "word" else ""
    current: list[str] = []
    outs = []
    for _ in range(rng.randrange(1, 12)):
        cut = rng.randrange(len(current) + 1)
        current = current[:cut] + [rng.choice(vocab) for _ in range(rng.randrange(4))]
        outs.append(Translation(sep.join(current)))
    final = current + [rng.choice(vocab) for _ in range(rng.randrange(3))]
    return outs + [Translation(sep.join(final), True)]


@pytest.mark.parametrize("unit", ["word", "char"])
def test_stable_property_no_shown_unit_is_retracted(unit: str) -> None:
    """Over random update sequences: within a segment every display extends the previous
    one, each display is a prefix the two latest outputs agreed on, the final is whole."""
    rng = random.Random(14)
    policy = Stable(unit)  # one object across segments: finals must reset it
    for _ in range(500):
        segment = _random_segment(rng, unit)
        before: list[str] = []
        previous: list[str] | None = None
        for out in segment:
            shown = split_units(policy.show(out), unit)
            current = split_units(out.text, unit)
            if out.final:
                assert shown == current
                continue
            assert shown[: len(before)] == before, "a shown unit was retracted"
            if len(shown) > len(before):  # it grew: both latest outputs start with it
                assert previous is not None
                assert current[: len(shown)] == shown == previous[: len(shown)]
            before, previous = shown, current


def test_mask_k_property_shows_a_prefix_of_each_output() -> None:
    rng = random.Random(5)
    for _ in range(300):
        k = rng.randrange(5)
        policy = MaskK(k)
        for out in _random_segment(rng, "word"):
            shown = split_units(policy.show(out), "word")
            words = split_units(out.text, "word")
            expect = words if out.final else words[: max(0, len(words) - k)]
            assert shown == expect
