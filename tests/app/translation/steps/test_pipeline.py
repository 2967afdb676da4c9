"""The pipeline: the steps in order, on a fake backend (the real model's run is
``tests/app/translation/test_translator.py``)."""

from __future__ import annotations

import asyncio

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
