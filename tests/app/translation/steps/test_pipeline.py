"""The pipeline: the steps in order, on a fake backend (the real model's run is
``tests/app/translation/test_translator.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from app.translation.options import TranslateOptions
from app.translation.steps.pipeline import first_attempt, run_steps
from app.translation.steps.request import UpdateRequest
from tests.app.translation.steps.fakes import FakeBackend, prompt

SOURCE = "The dog runs."
DE = TranslateOptions(source_lang="en", target_lang="de", mask_k=1)


def test_a_partial_is_one_generation_masked_for_the_viewer() -> None:
    b = FakeBackend()
    draft = b.tokenize(" Der Hund")
    b.results.append(b.result(" Der Hund läuft"))
    out = asyncio.run(run_steps(b, UpdateRequest(prompt(SOURCE), DE, False,
                                                 draft_tokens=draft)))
    assert len(b.requests) == 1 and b.requests[0].draft == draft
    assert b.requests[0].beta == DE.beta  # partials keep their bias
    assert out.display == "Der Hund" and out.caption == "Der Hund läuft"
    assert out.draft == b.tokenize(" Der Hund läuft") and out.pathology is None


def test_a_copied_final_is_retried_and_the_clean_retry_kept() -> None:
    b = FakeBackend()
    b.results += [b.result(SOURCE), b.result(" Der Hund läuft.")]
    out = asyncio.run(run_steps(b, UpdateRequest(prompt(SOURCE), DE, True,
                                                 retry_prompt=prompt(SOURCE))))
    assert len(b.requests) == 2 and b.requests[0].beta == 0.0  # final_beta
    assert out.retried == "copy" and out.pathology is None
    assert out.caption == "Der Hund läuft." and out.display == "Der Hund läuft."


def test_a_streamed_final_is_not_retried() -> None:
    b = FakeBackend(FakeBackend().result(SOURCE))
    req = UpdateRequest(prompt(SOURCE), DE, True, retry_prompt=prompt(SOURCE),
                        on_text=lambda _: None)
    v = asyncio.run(first_attempt(b, req))
    assert v.pathology == "copy" and not v.repairable
    b.results.append(b.result(SOURCE))
    out = asyncio.run(run_steps(b, req))
    assert out.retried is None and out.pathology == "copy"


def test_a_final_that_may_be_retried_gives_up_a_copy_early_and_others_never() -> None:
    source = "The committee met on Tuesday evening to discuss the budget."
    b = FakeBackend()
    b.results += [b.result(" The committee met on"), b.result(" Der Ausschuss tagte.")]
    retried = UpdateRequest(prompt(source), DE, True, retry_prompt=prompt(source))
    out = asyncio.run(run_steps(b, retried))
    give_up = b.requests[0].give_up
    assert give_up is not None and b.requests[1].give_up is None  # the retry runs whole
    assert give_up("The committee met on") == "copy"
    assert give_up("The committee met") is None  # three words: too few to tell
    assert give_up("Der Ausschuss tagte am") is None
    assert give_up("The Ausschuss met on") is None  # a word of its own
    assert out.retried == "copy" and out.caption == "Der Ausschuss tagte."
    # a given-up answer is a pathology even when the words before it read clean
    b = FakeBackend()
    cut = b.result(" Sie sagte")
    cut.gave_up = "copy"
    b.results += [cut, b.result(" Sie sagte es.")]
    out = asyncio.run(run_steps(b, retried))
    assert out.retried == "copy" and out.caption == "Sie sagte es."
    # a partial, a streamed final or a final without a retry prompt is never given up
    for req in (UpdateRequest(prompt(source), DE, False),
                UpdateRequest(prompt(source), DE, True, retry_prompt=prompt(source),
                              on_text=lambda _: None),
                UpdateRequest(prompt(source), DE, True)):
        b = FakeBackend(FakeBackend().result(" x"))
        asyncio.run(first_attempt(b, req))
        assert b.requests[0].give_up is None


# FLORES dev sentences the default model's first attempt copied (en-de, few-shot), and one
# it translates
COPIED = ("An inquiry was established to investigate.",
          "28-year-old Vidal had joined Barça three seasons ago, from Sevilla.",
          "According to reports, an apartment on Macbeth Street exploded due to a gas leak.",
          "The committee will publish its final report on renewable energy next spring.")


def test_on_the_model_a_copy_is_given_up_and_a_translation_is_untouched(engine) -> None:
    """The first attempt with the give-up (a final with a retry prompt) against the same
    attempt without it (no retry prompt): an answer that stays clean is the same token for
    token; one given up is a copy, cut where its words were all the source's."""
    from app.translation.backend import run_to_end
    from app.translation.llama_backend import StandaloneLlamaBackend
    from app.translation.prompts import FewShotFormat

    fmt, backend = FewShotFormat(), StandaloneLlamaBackend(engine)
    given_up = 0
    for source in COPIED:
        p = fmt.translation(source, "en", "de")
        req = UpdateRequest(p, DE, True, examples=fmt.examples("en", "de"))
        whole = run_to_end(first_attempt(backend, req))
        cut = run_to_end(first_attempt(backend, replace(req, retry_prompt=p)))
        if cut.result.gave_up is None:
            assert cut.result.tokens == whole.result.tokens and cut.pathology == whole.pathology
            continue
        given_up += 1
        assert whole.pathology == "copy" and cut.pathology == "copy"
        assert whole.result.tokens[: len(cut.result.tokens)] == cut.result.tokens
        assert len(cut.result.tokens) < len(whole.result.tokens)
    # the translated one is never given up; of the three copies, two were on the 2-core VM
    assert 1 <= given_up <= len(COPIED) - 1
