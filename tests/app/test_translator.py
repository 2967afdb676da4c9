"""translate_update on the real model: the two mask-k variants and the length guard."""

from __future__ import annotations

import asyncio
import threading

from app.engine.engine import GenerationResult
from app.engine.verify import top2_gap
from app.prompts import FewShotFormat, tokenize_prompt
from app.sessions import Session, SessionStore
from app.translator import (
    TranslateOptions,
    TranslationOutcome,
    Translator,
    masked_tokens,
    next_draft,
    trailing_punctuation,
    translate_update,
)

FMT = FewShotFormat()


def test_masked_tokens() -> None:
    assert masked_tokens([1, 2, 3, 4], 3, False) == [1]
    assert masked_tokens([1, 2], 3, False) == []
    assert masked_tokens([1, 2, 3, 4], 3, True) == [1, 2, 3, 4]


def test_a_runaway_output_is_no_draft() -> None:
    def result(finish: str, looped: bool = False) -> GenerationResult:
        return GenerationResult(tokens=[5, 6, 7], text="x", finish_reason=finish,
                                prompt_tokens=3, prompt_tokens_cached=0, looped=looped)

    assert next_draft(result("stop")) == [5, 6, 7]
    assert next_draft(result("length")) == []
    assert next_draft(result("stop", looped=True)) == []
    assert next_draft(result("stop"), pathology="copy") == []


def test_draft_mask_k_cuts_the_draft_display_mask_does_not(engine) -> None:
    prompt = FMT.translation("The committee met on Tuesday evening", "en", "de")
    previous = translate_update(engine, FMT.translation("The committee met on", "en", "de"),
                                TranslateOptions(target_lang="de"), False).result
    prev = list(previous.tokens)
    cut = translate_update(engine, prompt, TranslateOptions(target_lang="de", mask_k=2,
                                                            mask_mode="draft"),
                           False, draft_tokens=prev).result
    assert cut.ssbd_draft_tokens == len(prev) - 2
    out = translate_update(engine, prompt, TranslateOptions(target_lang="de", mask_k=2), False,
                           draft_tokens=prev)
    kept, display = out.result, out.display
    assert kept.ssbd_draft_tokens == len(prev)
    assert display == engine.rt.detokenize(kept.tokens[:-2]).strip()


def test_trailing_punctuation_and_length_cap(engine) -> None:
    rt = engine.rt
    assert trailing_punctuation(rt, rt.tokenize(" Hallo Welt.")) == 1
    assert trailing_punctuation(rt, rt.tokenize(" Hallo Welt")) == 0
    r = translate_update(engine, FMT.translation("Yes.", "en", "de"),
                         TranslateOptions(target_lang="de", max_tokens=500), True).result
    assert len(r.tokens) <= 3 * len(rt.tokenize("Yes.")) + 16


def test_agreed_scope_biases_only_the_agreed_prefix(engine) -> None:
    """A draft that nobody agreed on is verified without bias, so a wrong one is rejected."""
    prompt = FMT.translation("The weather was cold and windy all week", "en", "de")
    wrong = engine.rt.tokenize(" Das Essen war warm und sonnig den ganzen Monat")
    biased = translate_update(engine, prompt, TranslateOptions(target_lang="de", beta=0.99),
                              False, draft_tokens=wrong).result
    assert biased.ssbd_accepted_tokens == len(wrong)  # beta 0.99 keeps any draft
    gated = translate_update(
        engine, prompt, TranslateOptions(target_lang="de", beta=0.99, bias_scope="agreed"),
        False, draft_tokens=wrong, draft_agreed=0).result
    assert gated.ssbd_accepted_tokens < len(wrong)
    kept = translate_update(
        engine, prompt, TranslateOptions(target_lang="de", beta=0.99, bias_scope="agreed"),
        False, draft_tokens=wrong, draft_agreed=3).result
    assert kept.tokens[:3] == wrong[:3]


def test_a_final_is_verified_without_bias(engine) -> None:
    """The default final policy: whatever the draft, a final is the greedy translation."""
    prompt = FMT.translation("The weather was cold and windy all week.", "en", "de")
    wrong = engine.rt.tokenize(" Das Essen war warm und sonnig den ganzen Monat.")
    fresh = translate_update(engine, prompt, TranslateOptions(target_lang="de"), True,
                             draft_tokens=[]).result
    final = translate_update(engine, prompt, TranslateOptions(target_lang="de", beta=0.99),
                             True, draft_tokens=wrong).result
    if final.tokens != fresh.tokens:  # allowed only where the greedy choice is a near-tie
        i = next(j for j, (a, b) in enumerate(zip(final.tokens, fresh.tokens, strict=False))
                 if a != b)
        engine.truncate(0)
        first, _ = engine.evaluate_prompt(tokenize_prompt(prompt, engine.rt.tokenize),
                                          fresh.tokens[:i])
        assert top2_gap(engine.row(first + i)) < 1.0
    assert final.ssbd_accepted_tokens < len(wrong)
    old = translate_update(engine, prompt, TranslateOptions(target_lang="de", beta=0.99,
                                                            final_beta=None),
                           True, draft_tokens=wrong).result
    assert old.tokens[: len(wrong)] == wrong  # the SSBD paper's final keeps the bad draft


class InlineWorker:
    """The engine worker's ``submit``, run inline on the test's engine; it keeps the queue
    arguments so a test can see what the translator asked for."""

    def __init__(self, engine) -> None:  # noqa: ANN001
        self.engine = engine
        self.calls: list[dict] = []

    async def submit(self, fn, **kwargs):  # noqa: ANN001, ANN003
        self.calls.append(kwargs)
        return fn(self.engine)


def _translator(engine) -> tuple[Translator, InlineWorker]:  # noqa: ANN001
    worker = InlineWorker(engine)
    return Translator(worker, FMT, SessionStore()), worker  # type: ignore[arg-type]


def test_translate_drives_the_session_lifecycle(engine) -> None:
    """Each applied update commits its output as the next draft; a final starts anew."""
    translator, worker = _translator(engine)
    session = Session("lifecycle")
    opts = TranslateOptions(target_lang="de")

    def run(text: str, final: bool, **kw) -> TranslationOutcome:  # noqa: ANN003
        return asyncio.run(translator.translate(text, opts, session=session, is_final=final,
                                                **kw))

    first = run("The committee met", False, seq=1, queue_seq=7)
    assert first.revision == 1 and first.result.ssbd_draft_tokens == 0
    assert session.newest_seq == 1 and worker.calls[0]["seq"] == 7
    second = run("The committee met on Tuesday", False, seq=2)
    assert second.revision == 2
    assert second.result.drafts.ssbd_proposed == len(first.result.tokens)
    final = run("The committee met on Tuesday.", True, seq=3)
    assert final.revision == 3 and session.revision == 0
    assert session.plan_draft("de", "en").tokens == []
    after = run("Next.", False, seq=4)
    assert after.revision == 1 and after.result.ssbd_draft_tokens == 0


def test_a_cancelled_update_is_not_committed(engine) -> None:
    translator, _ = _translator(engine)
    session = Session("cancel")
    opts = TranslateOptions(target_lang="de")
    asyncio.run(translator.translate("Good morning", opts, session=session, is_final=False,
                                     seq=1))
    draft = session.plan_draft("de", "en")
    stop = threading.Event()
    stop.set()
    out = asyncio.run(translator.translate("Good morning everyone", opts, session=session,
                                           is_final=False, cancel=stop, seq=2))
    assert out.result.finish_reason == "cancelled"
    assert session.plan_draft("de", "en") == draft and session.newest_seq == 1
    assert session.newest_source == "Good morning"


def test_a_prediction_is_the_draft_and_leaves_the_session_alone(engine) -> None:
    translator, _ = _translator(engine)
    opts = TranslateOptions(target_lang="de", beta=0.0)
    out = asyncio.run(translator.translate("Good morning", opts, is_final=True,
                                           prediction="Guten Morgen"))
    assert out.session_id is None and out.result.drafts.ssbd_proposed > 0
