"""The append step: which call of the commit policy each update makes."""

from __future__ import annotations

from app.translation.commit_policy import SegmentCommits
from app.translation.steps.append import append_step
from tests.app.translation.steps.fakes import FakeBackend


def test_partials_commit_what_two_outputs_agree_on_and_a_final_closes() -> None:
    b = FakeBackend()
    commits = SegmentCommits(b.token_bytes, "word", mask_k=0)
    first = b.tokenize(" Der Hund läuft")
    assert append_step(commits, first, "Der Hund läuft", False) is None  # nothing to agree
    step = append_step(commits, b.tokenize(" Der Hund läuft schnell"),
                       "Der Hund läuft schnell", False)
    # the word after the cut must be agreed on too: "läuft" is, so "Der Hund" is stable
    assert step is not None and step.text == "Der Hund" and step.delta == "Der Hund"
    last = append_step(commits, b.tokenize(" Der Hund läuft schnell."),
                       "Der Hund läuft schnell.", True)
    assert last is not None and last.final and last.delta == " läuft schnell."
    assert append_step(commits, first, "x", False) is None  # the segment is closed


def test_a_partial_that_is_no_translation_commits_nothing_and_resets_agreement() -> None:
    b = FakeBackend()
    commits = SegmentCommits(b.token_bytes, "word", mask_k=0)
    out = b.tokenize(" Der Hund läuft schnell")
    append_step(commits, out, "Der Hund läuft schnell", False)
    assert append_step(commits, out, "Der Hund läuft schnell", False, pathology="loop") is None
    assert commits.previous is None
    assert append_step(commits, out, "Der Hund läuft schnell", False) is None
