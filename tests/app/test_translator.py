"""translate_update on the real model: the two mask-k variants and the length guard."""

from __future__ import annotations

from app.engine.engine import GenerationResult
from app.prompts import FewShotFormat
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


def test_draft_mask_k_cuts_the_draft_display_mask_does_not(engine) -> None:
    prompt = FMT.translation("The committee met on Tuesday evening", "en", "de")
    previous, _ = translate_update(engine, FMT.translation("The committee met on", "en", "de"),
                                   TranslateOptions(target_lang="de"), False)
    prev = list(previous.tokens)
    cut, _ = translate_update(engine, prompt, TranslateOptions(target_lang="de", mask_k=2,
                                                               mask_mode="draft"),
                              False, draft_tokens=prev)
    assert cut.ssbd_draft_tokens == len(prev) - 2
    kept, display = translate_update(engine, prompt, TranslateOptions(target_lang="de",
                                                                      mask_k=2), False,
                                     draft_tokens=prev)
    assert kept.ssbd_draft_tokens == len(prev)
    assert display == engine.rt.detokenize(kept.tokens[:-2]).strip()


def test_trailing_punctuation_and_length_cap(engine) -> None:
    rt = engine.rt
    assert trailing_punctuation(rt, rt.tokenize(" Hallo Welt.")) == 1
    assert trailing_punctuation(rt, rt.tokenize(" Hallo Welt")) == 0
    r, _ = translate_update(engine, FMT.translation("Yes.", "en", "de"),
                            TranslateOptions(target_lang="de", max_tokens=500), True)
    assert len(r.tokens) <= 3 * len(rt.tokenize("Yes.")) + 16


def test_agreed_scope_biases_only_the_agreed_prefix(engine) -> None:
    """A draft that nobody agreed on is verified without bias, so a wrong one is rejected."""
    prompt = FMT.translation("The weather was cold and windy all week", "en", "de")
    wrong = engine.rt.tokenize(" Das Essen war warm und sonnig den ganzen Monat")
    biased, _ = translate_update(engine, prompt, TranslateOptions(target_lang="de", beta=0.99),
                                 False, draft_tokens=wrong)
    assert biased.ssbd_accepted_tokens == len(wrong)  # beta 0.99 keeps any draft
    gated, _ = translate_update(
        engine, prompt, TranslateOptions(target_lang="de", beta=0.99, bias_scope="agreed"),
        False, draft_tokens=wrong, draft_agreed=0)
    assert gated.ssbd_accepted_tokens < len(wrong)
    kept, _ = translate_update(
        engine, prompt, TranslateOptions(target_lang="de", beta=0.99, bias_scope="agreed"),
        False, draft_tokens=wrong, draft_agreed=3)
    assert kept.tokens[:3] == wrong[:3]
