"""The verdict: runaway outputs and diagnosis."""

from __future__ import annotations

from app.translation.options import TranslateOptions
from app.translation.steps.verdict import diagnose_output, is_clean, merged, ran_away
from tests.app.translation.steps.fakes import FakeBackend


def test_a_client_max_tokens_below_the_cap_is_no_runaway() -> None:
    b = FakeBackend()
    cut = b.result(" Der Hund", finish="length")
    assert ran_away(cut, TranslateOptions(max_tokens=256), cap=20)
    assert not ran_away(cut, TranslateOptions(max_tokens=5), cap=20)
    assert ran_away(b.result(" x", looped=True), TranslateOptions(max_tokens=5), cap=20)


def test_diagnosis_per_pair() -> None:
    b = FakeBackend()
    de = TranslateOptions(source_lang="en", target_lang="de")
    assert diagnose_output(b.result("The dog runs."), "The dog runs.", de, None, 20) == "copy"
    assert diagnose_output(b.result("Der Hund läuft."), "The dog runs.", de, None, 20) is None
    same = TranslateOptions(source_lang="en", target_lang="en")
    assert diagnose_output(b.result("The dog runs."), "The dog runs.", same, None, 20) is None
    assert diagnose_output(b.result("x", looped=True), "x", same, None, 20) == "loop"


def test_merged_costs_and_clean_attempts() -> None:
    b = FakeBackend()
    first, again = b.result("a", decode_ms=2.0), b.result("b", decode_ms=3.0)
    merged(again, first, with_drafts=True)
    assert (again.decode_ms, again.forward_passes) == (5.0, 2)
    assert is_clean(again) and not is_clean(b.result(" ")) \
        and not is_clean(b.result("x", finish="cancelled"))
