"""The prompt step: context bounded, glossary entries as data, a final's extra prompts."""

from __future__ import annotations

from app.translation.options import TranslateOptions
from app.translation.prompts import FewShotFormat
from app.translation.steps.prompt import bounded_context, plan_prompt

FMT = FewShotFormat()


def test_context_is_the_latest_pairs_that_fit() -> None:
    pairs = [("a", "A"), ("bb", "BB"), ("ccc", "CCC")]
    assert bounded_context(pairs, 2, 100) == [("bb", "BB"), ("ccc", "CCC")]
    assert bounded_context(pairs, 3, 10) == [("bb", "BB"), ("ccc", "CCC")]
    assert bounded_context(pairs, 0, 100) == []


def test_a_partial_has_no_retry_prompt_and_a_final_with_terms_a_term_prompt() -> None:
    opts = TranslateOptions(glossary={"board": "Vorstand"}, context=1)
    partial = plan_prompt(FMT, "The board met", opts, [("Hi.", "Hallo.")], False, 2000)
    assert partial.retry is None and partial.term_prompt is None
    assert [t.target for t in partial.terms] == ["Vorstand"]
    assert ("Hi.", "Hallo.") in partial.examples
    final = plan_prompt(FMT, "The board met.", opts, [], True, 2000)
    assert final.retry is not None and final.term_prompt is not None
    assert "Vorstand" in final.term_prompt(["board"]).source
    assert "Vorstand" in final.prompt.text  # shown as data ("prompt" glossary step)
    hidden = plan_prompt(FMT, "The board met.", TranslateOptions(
        glossary={"board": "Vorstand"}, glossary_steps=("draft",)), [], True, 2000)
    assert "Vorstand" not in hidden.prompt.text
