"""The commit step: what is kept as the next update's draft, and why not."""

from __future__ import annotations

from app.translation.steps.commit import commit_step, guard, next_draft
from tests.app.translation.steps.fakes import FakeBackend


def test_a_runaway_or_diagnosed_output_is_no_draft() -> None:
    b = FakeBackend()
    assert next_draft(b.result(" a b")) == b.result(" a b").tokens
    assert next_draft(b.result(" a", finish="length")) == []
    assert next_draft(b.result(" a", looped=True)) == []
    assert next_draft(b.result(" a"), pathology="copy") == []


def test_the_guard() -> None:
    assert guard("copy", draft_guard=False, cleaned=False) is None
    assert guard("copy", draft_guard=True, cleaned=False) == "copy"
    assert guard("loop", draft_guard=False, cleaned=False) == "loop"
    assert guard("label", draft_guard=False, cleaned=True) == "label"
    assert guard("label", draft_guard=False, cleaned=False) is None


def test_commit_step_keeps_the_caption_tokens_or_says_why_not() -> None:
    b = FakeBackend()
    r = b.result(" Der Hund")
    assert commit_step(r, [7, 8], None, False, False).tokens == [7, 8]
    copy = commit_step(r, [7, 8], "copy", False, False)
    assert copy.tokens == [7, 8] and copy.dropped is None  # no guard: a copy is kept
    looped = commit_step(b.result(" a", looped=True), [7], None, False, False)
    assert looped.tokens == [] and looped.dropped == "loop"
