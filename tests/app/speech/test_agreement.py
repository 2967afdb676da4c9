"""LocalAgreement-2 on made-up hypotheses."""

from __future__ import annotations

from app.speech.agreement import LocalAgreement, Word


def _words(text: str, step: float = 0.4) -> list[Word]:
    return [Word(w, i * step, i * step + step * 0.9) for i, w in enumerate(text.split())]


def test_words_are_committed_when_two_decodes_agree() -> None:
    policy = LocalAgreement()
    assert policy.update(_words("the commit")) == []  # one decode: nothing agreed yet
    assert policy.tail == _words("the commit")
    committed = policy.update(_words("the committee will"))
    assert [w.text for w in committed] == ["the"]  # "commit" != "committee"
    committed = policy.update(_words("the committee will publish"))
    assert [w.text for w in committed] == ["committee", "will"]
    assert policy.text() == "the committee will"
    assert policy.text(policy.tail) == "publish"


def test_case_and_punctuation_do_not_break_agreement() -> None:
    policy = LocalAgreement()
    policy.update(_words("Thank you all"))
    committed = policy.update(_words("thank you, all for"))
    assert [w.text for w in committed] == ["thank", "you,", "all"]


def test_committed_words_are_never_taken_back() -> None:
    policy = LocalAgreement()
    policy.update(_words("we have updated"))
    policy.update(_words("we have updated the"))
    assert policy.text() == "we have updated"
    policy.update(_words("we've updated the table"))  # a re-segmented decode
    assert policy.text().startswith("we have updated")


def test_finish_takes_the_last_hypothesis_whole() -> None:
    policy = LocalAgreement()
    policy.update(_words("next slide"))
    policy.update(_words("next slide please"))
    rest = policy.finish(_words("next slide please."))
    assert [w.text for w in rest] == ["please."]
    assert policy.text() == "next slide please." and policy.tail == []
