from drafters.base import DraftContext
from drafters.matching import follow_match
from drafters.ngram import PromptNgramDrafter


def test_follow_match_prefers_longest_then_latest() -> None:
    source = [1, 2, 3, 9, 2, 3, 7, 8]
    assert follow_match([2, 3], source, 2) == [7, 8]  # latest occurrence of (2, 3)
    assert follow_match([1, 2, 3], source, 2) == [9, 2]  # the longer suffix wins
    assert follow_match([5], source, 2) == []
    assert follow_match([8], source, 3) == []  # a match at the very end has no follower


def test_prompt_ngram_copies_from_the_prompt() -> None:
    drafter = PromptNgramDrafter(min_n=2)
    prompt = [10, 11, 12, 13, 14, 15]
    assert drafter.propose(DraftContext(history=[5, 11, 12], prompt=prompt), 3) == [13, 14, 15]
    assert drafter.propose(DraftContext(history=[5, 12], prompt=prompt), 3) == []  # n < 2


def test_prompt_ngram_prefers_its_own_output() -> None:
    drafter = PromptNgramDrafter(min_n=2)
    ctx = DraftContext(history=[1, 2, 40, 1, 2], prompt=[1, 2, 99])
    assert drafter.propose(ctx, 1) == [40]
