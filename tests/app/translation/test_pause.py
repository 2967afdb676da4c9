"""Translating at the speaker's pause (``app.translation.pause``) on the real model: a
partial heard at a pause is translated as its final will be and captioned as a partial; a
final with the same words takes that translation (the caption it would have got); a final
with other words, or another forced start, translates as before."""

from __future__ import annotations

import asyncio

from app.engine.engine import GenerationResult
from app.translation.pause import PauseTranslation, request_key
from app.translation.prompts import FewShotFormat
from app.translation.sessions import Session
from app.translation.steps.request import UpdateOutcome, UpdateRequest
from app.translation.translator import (
    Hints,
    TranslateOptions,
    TranslationOutcome,
    UpdateSession,
)
from tests.app.translation.test_translator import _translator

SOURCE = "The committee met on Tuesday evening to discuss the budget."


def _run(translator, session: Session, text: str, final: bool, opts: TranslateOptions,
         pause: bool = False, forced: list[int] | None = None) -> TranslationOutcome:
    return asyncio.run(translator.translate(
        text, opts, is_final=final, session=UpdateSession(session=session),
        hints=Hints(likely_final=pause, forced=forced or ())))


def test_a_final_with_the_pauses_words_takes_its_translation(engine) -> None:
    translator, worker = _translator(engine)
    opts = TranslateOptions(target_lang="de", mask_k=3)
    # the final as it comes without a pause: its own session, its own partial before it
    plain = Session("plain")
    _run(translator, plain, "The committee met on Tuesday", False, opts)
    expected = _run(translator, plain, SOURCE, True, opts)

    session = Session("paused")
    _run(translator, session, "The committee met on Tuesday", False, opts)
    paused = _run(translator, session, SOURCE, False, opts, pause=True)
    assert paused.pause == "translated" and not paused.is_final
    # translated as the final will be (no bias), captioned as a partial (masked)
    assert paused.text == expected.text
    assert len(paused.display_text) < len(paused.text)
    calls = len(worker.calls)
    final = _run(translator, session, SOURCE, True, opts)
    assert final.pause == "reused" and len(worker.calls) == calls  # no job ran
    assert final.text == expected.text and final.display_text == expected.display_text
    assert final.result.tokens == expected.result.tokens
    # the final closed the segment as any final does, and its translation is context
    assert session.revision == 0 and session.pause_translation is None
    assert session.context("de", "en", 1) == [(SOURCE, expected.text)]


def test_a_final_with_other_words_translates_anew(engine) -> None:
    translator, worker = _translator(engine)
    opts = TranslateOptions(target_lang="de")
    session = Session("went-on")
    _run(translator, session, "The committee met", False, opts, pause=True)
    calls = len(worker.calls)
    final = _run(translator, session, SOURCE, True, opts)
    assert final.pause is None and len(worker.calls) == calls + 1
    fresh = Session("fresh")
    assert final.text == _run(translator, fresh, SOURCE, True, opts).text


def test_a_final_in_other_options_translates_anew(engine) -> None:
    translator, worker = _translator(engine)
    session = Session("options")
    _run(translator, session, SOURCE, False, TranslateOptions(target_lang="de"), pause=True)
    calls = len(worker.calls)
    final = _run(translator, session, SOURCE, True, TranslateOptions(target_lang="fr"))
    assert final.pause is None and len(worker.calls) == calls + 1


def test_append_only_words_committed_since_the_pause_still_take_it(engine) -> None:
    """Between the pause and the final, append-only text may commit more of the answer:
    forcing a start of the pause translation's own answer gives that answer again."""
    translator, worker = _translator(engine)
    opts = TranslateOptions(target_lang="de")
    session = Session("append")
    paused = _run(translator, session, SOURCE, False, opts, pause=True)
    committed = list(paused.result.tokens[:3])
    calls = len(worker.calls)
    final = _run(translator, session, SOURCE, True, opts, forced=committed)
    assert final.pause == "reused" and len(worker.calls) == calls
    assert final.result.tokens[:3] == committed
    # forced words the pause translation did not say: translated anew
    session = Session("append-other")
    _run(translator, session, SOURCE, False, opts, pause=True)
    other = engine.rt.tokenize(" Am Montag", add_bos=False)
    calls = len(worker.calls)
    final = _run(translator, session, SOURCE, True, opts, forced=other)
    assert final.pause is None and len(worker.calls) == calls + 1
    assert final.result.tokens[: len(other)] == other


def _outcome(tokens: list[int], retried: str | None = None) -> UpdateOutcome:
    return UpdateOutcome(result=GenerationResult(
        tokens=tokens, text="x", finish_reason="stop", prompt_tokens=1,
        prompt_tokens_cached=0), display="x", retried=retried)


def test_what_a_kept_translation_serves() -> None:
    prompt = FewShotFormat().translation(SOURCE, "en", "de")
    opts = TranslateOptions(target_lang="de")
    req = UpdateRequest(prompt=prompt, options=opts, is_final=True)
    kept = PauseTranslation(request_key(req), (), _outcome([5, 6, 7]))
    assert kept.serves(req)
    assert kept.serves(UpdateRequest(prompt=prompt, options=opts, is_final=True,
                                     forced=[5, 6]))
    assert not kept.serves(UpdateRequest(prompt=prompt, options=opts, is_final=True,
                                         forced=[5, 9]))
    other = FewShotFormat().translation(SOURCE + " Then", "en", "de")
    assert not kept.serves(UpdateRequest(prompt=other, options=opts, is_final=True))
    retried = PauseTranslation(request_key(req), (), _outcome([5, 6, 7], retried="loop"))
    assert retried.serves(req)
    assert not retried.serves(UpdateRequest(prompt=prompt, options=opts, is_final=True,
                                            forced=[5]))
