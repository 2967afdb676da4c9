"""The commit step: what is kept as the next update's draft, and why not."""

from __future__ import annotations

from app.translation.options import Languages
from app.translation.sessions import Session
from app.translation.steps.commit import commit_session, commit_step, guard, next_draft
from app.translation.steps.request import UpdateOutcome
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


def test_commit_session_records_the_draft_unless_cancelled() -> None:
    b = FakeBackend()
    langs = Languages("en", "de")
    assert commit_session(None, "x", UpdateOutcome(b.result(" a"), "a"), "a", False, langs,
                          None) == 1
    session = Session("s")
    cancelled = UpdateOutcome(b.result(" a", finish="cancelled"), "a", draft=[5])
    assert commit_session(session, "x", cancelled, "a", False, langs, 1) == 1
    assert session.plan_draft("de", "en").tokens == []
    kept = UpdateOutcome(b.result(" Der Hund"), "Der", draft=[5, 6])
    assert commit_session(session, "The dog", kept, "Der Hund", False, langs, 2) == 1
    assert session.plan_draft("de", "en").tokens == [5, 6]
    assert commit_session(session, "The dog", kept, "Der Hund", False, langs, 3) == 2
