"""The retry step: a pathological final translated once more, kept only when clean."""

from __future__ import annotations

import asyncio

from app.translation.options import TranslateOptions
from app.translation.steps.request import UpdateRequest
from app.translation.steps.retry import may_retry, retry_step, should_retry
from app.translation.steps.verdict import Verdict
from tests.app.translation.steps.fakes import FakeBackend, prompt

SOURCE = "The dog runs."
DE = TranslateOptions(source_lang="en", target_lang="de")


def request(**kw: object) -> UpdateRequest:
    base: dict[str, object] = {"prompt": prompt(SOURCE), "options": DE, "is_final": True,
                               "retry_prompt": prompt(SOURCE)}
    return UpdateRequest(**{**base, **kw})  # type: ignore[arg-type]


def test_only_a_repairable_pathological_final_with_a_retry_prompt_is_retried() -> None:
    b = FakeBackend()
    bad = Verdict(b.result(SOURCE), "copy", 20, repairable=True)
    assert should_retry(request(), bad)
    assert not should_retry(request(), Verdict(bad.result, None, 20, True))
    assert not should_retry(request(), Verdict(bad.result, "copy", 20, False))
    assert not should_retry(request(retry_prompt=None), bad)
    assert not should_retry(request(options=TranslateOptions(final_retry=False)), bad)
    # framing with cleaning off is counted, not acted on
    framed = Verdict(bad.result, "label", 20, repairable=True)
    assert not should_retry(request(), framed)
    assert should_retry(request(prompt=prompt(SOURCE, clean_framing=True)), framed)


def test_a_clean_retry_replaces_the_final_and_carries_both_costs() -> None:
    b = FakeBackend()
    first = b.result(SOURCE, decode_ms=2.0)
    b.results.append(b.result("Der Hund läuft.", decode_ms=3.0))
    v = asyncio.run(retry_step(b, request(), Verdict(first, "copy", 20, repairable=True)))
    assert v.result.text == "Der Hund läuft." and v.pathology is None
    assert v.retried == "copy" and v.retry_ms == 3.0 and v.result.decode_ms == 5.0
    req = b.requests[0]
    assert (req.draft, req.beta, req.bias_limit, req.drafters) == ([], 0.0, 0, None)
    assert req.one_off  # the session's cached prompt stays for its next update


def test_a_retry_that_is_no_better_is_dropped() -> None:
    b = FakeBackend()
    first = b.result(SOURCE, decode_ms=2.0)
    b.results.append(b.result(SOURCE, decode_ms=3.0))
    v = asyncio.run(retry_step(b, request(), Verdict(first, "copy", 20, repairable=True)))
    assert v.result is first and v.pathology == "copy" and v.retried == "copy"
    assert v.retry_ms == 3.0 and first.decode_ms == 5.0


def test_no_retry_leaves_the_verdict_alone() -> None:
    b = FakeBackend()
    v = Verdict(b.result("Der Hund läuft."), None, 20, repairable=True)
    assert asyncio.run(retry_step(b, request(), v)) is v and not b.requests


def test_a_given_up_first_answer_gives_way_to_any_whole_retry() -> None:
    """A first answer cut short as a copy (``gave_up``) is no caption: the retry's whole
    answer replaces it even when the retry is a copy too."""
    b = FakeBackend()
    first = b.result("The dog")
    first.gave_up = "copy"
    b.results.append(b.result(SOURCE))
    v = asyncio.run(retry_step(b, request(), Verdict(first, "copy", 20, repairable=True)))
    assert v.result.text == SOURCE and v.pathology == "copy" and v.retried == "copy"


def test_may_retry_is_the_retry_rule_before_the_verdict() -> None:
    assert may_retry(request())
    assert not may_retry(request(is_final=False))
    assert not may_retry(request(retry_prompt=None))
    assert not may_retry(request(options=TranslateOptions(final_retry=False)))
    assert not may_retry(request(on_text=lambda _: None))
