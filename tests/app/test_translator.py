"""translate_update on the real model: the two mask-k variants and the length guard."""

from __future__ import annotations

from app.engine.engine import GenerationResult
from app.engine.verify import top2_gap
from app.prompts import FewShotFormat, tokenize_prompt
from app.translator import (
    TranslateOptions,
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
