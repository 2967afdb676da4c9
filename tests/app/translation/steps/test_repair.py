"""The repair step: a final missing glossary terms decoded again with the terms proposed."""

from __future__ import annotations

import asyncio

from app.translation.glossary import Term
from app.translation.options import TranslateOptions
from app.translation.steps.repair import repair_step, should_repair
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verdict import Verdict
from drafters.glossary import GlossaryContinuation, GlossaryStart
from tests.app.translation.steps.fakes import FakeBackend, prompt

SOURCE = "The board met."
TERMS = [Term("board", "Vorstand")]
DE = TranslateOptions(source_lang="en", target_lang="de")


def request(**kw: object) -> UpdateRequest:
    base: dict[str, object] = {"prompt": prompt(SOURCE), "options": DE, "is_final": True,
                               "terms": TERMS}
    return UpdateRequest(**{**base, **kw})  # type: ignore[arg-type]


def test_repair_is_due_for_a_repairable_final_missing_a_term() -> None:
    b = FakeBackend()
    v = Verdict(b.result("Das Gremium tagte."), None, 20, repairable=True, missing=["board"])
    assert should_repair(request(), v)
    assert not should_repair(request(options=TranslateOptions(final_retry=False)), v)
    assert not should_repair(request(options=TranslateOptions(glossary_steps=("prompt",))), v)
    assert not should_repair(request(), Verdict(v.result, None, 20, repairable=False,
                                                missing=["board"]))


def test_the_term_prompt_first_then_the_terms_proposed() -> None:
    b = FakeBackend()
    first = b.result("Das Gremium tagte.", decode_ms=2.0)
    b.results += [b.result("Das Gremium tagte.", decode_ms=1.0),
                  b.result("Der Vorstand tagte.", decode_ms=4.0)]
    seen: list[list[str]] = []

    def term_prompt(missing: list[str]):  # noqa: ANN202
        seen.append(missing)
        return prompt("The Vorstand met.")

    v = asyncio.run(repair_step(b, request(term_prompt=term_prompt),
                                Verdict(first, None, 20, repairable=True, cut=True)))
    assert seen == [["board"]]
    assert v.result.text == "Der Vorstand tagte." and v.missing == []
    assert v.retried == "glossary_miss" and v.retry_ms == 5.0 and v.pathology is None
    assert not v.cut
    first_chain, second_chain = (r.drafters for r in b.requests)
    assert [type(d) for d in first_chain.drafters] == [GlossaryContinuation]
    assert [type(d) for d in second_chain.drafters] == [GlossaryContinuation, GlossaryStart]


def test_a_final_still_missing_a_term_is_a_glossary_miss() -> None:
    b = FakeBackend()
    first = b.result("Das Gremium tagte.")
    b.results.append(b.result("Das Gremium tagte."))
    v = asyncio.run(repair_step(b, request(), Verdict(first, None, 20, repairable=True)))
    assert v.result is first and v.missing == ["board"] and v.pathology == "glossary_miss"
    partial = asyncio.run(repair_step(b, request(is_final=False),
                                      Verdict(first, None, 20, repairable=False)))
    assert partial.pathology is None and partial.missing == ["board"]
