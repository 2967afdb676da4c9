"""The draft step: the draft past the forced prefix, masked, with its bias limit."""

from __future__ import annotations

from dataclasses import replace

from app.translation.glossary import Term
from app.translation.options import TranslateOptions
from app.translation.steps.draft import (
    GLOSSARY_BETA,
    continuation,
    prepare_draft,
    trailing_punctuation,
    with_glossary,
)
from app.translation.steps.request import UpdateRequest
from drafters.chain import DrafterChain
from drafters.glossary import GlossaryContinuation
from tests.app.translation.steps.fakes import FakeBackend, prompt


def request(**kw: object) -> UpdateRequest:
    opts = kw.pop("options", TranslateOptions())
    return UpdateRequest(prompt=prompt("The dog runs."), options=opts,  # type: ignore[arg-type]
                         is_final=False, **kw)  # type: ignore[arg-type]


def test_trailing_punctuation_counts_only_final_punctuation() -> None:
    b = FakeBackend()
    assert trailing_punctuation(b, b.tokenize(" Der Hund läuft !")) == 1
    assert trailing_punctuation(b, b.tokenize(" Der Hund läuft")) == 0
    assert trailing_punctuation(b, b.tokenize(" ! ?")) == 2


def test_continuation_is_the_draft_past_the_forced_prefix() -> None:
    assert continuation([1, 2, 3], 2, ()) == ([1, 2, 3], 2)
    assert continuation([1, 2, 3], 2, [1]) == ([2, 3], 1)
    assert continuation([1, 2, 3], None, [1, 2]) == ([3], None)
    assert continuation([1, 2, 3], 3, [9]) == ([], 0)  # not decoded with the prefix


def test_the_final_punctuation_of_a_draft_is_not_biased() -> None:
    b = FakeBackend()
    tokens = b.tokenize(" Der Hund läuft .")
    d = prepare_draft(b, request(draft_tokens=tokens))
    assert d.tokens == tokens and d.bias_limit == 3
    off = prepare_draft(b, request(draft_tokens=tokens,
                                   options=TranslateOptions(unbiased_tail=False)))
    assert off.bias_limit == 4


def test_draft_mask_and_agreed_scope() -> None:
    b = FakeBackend()
    tokens = b.tokenize(" Der Hund läuft schnell")
    masked = prepare_draft(b, request(draft_tokens=tokens, options=TranslateOptions(
        mask_k=2, mask_mode="draft")))
    assert masked.tokens == tokens[:2]
    shown = prepare_draft(b, request(draft_tokens=tokens, options=TranslateOptions(mask_k=2)))
    assert shown.tokens == tokens  # display-only mask: the draft keeps them
    agreed = prepare_draft(b, request(draft_tokens=tokens, draft_agreed=1,
                                      options=TranslateOptions(bias_scope="agreed")))
    assert agreed.bias_limit == 1


def test_a_prediction_is_tokenized_as_an_answer_begins() -> None:
    b = FakeBackend()
    few_shot = replace(prompt("The dog runs."), stop_at_newline=True)
    req = replace(request(draft_text="Der Hund"), prompt=few_shot)
    assert b.detokenize(prepare_draft(b, req).tokens) == " Der Hund"
    assert b.detokenize(prepare_draft(b, request(draft_text="Der Hund")).tokens) == "Der Hund"
    assert prepare_draft(b, request(draft_text="")).tokens == []


def test_extra_draft_and_forced_prefix() -> None:
    b = FakeBackend()
    tokens = b.tokenize(" Der Hund läuft")
    d = prepare_draft(b, request(draft_tokens=tokens, forced=tokens[:1], extra_draft=[99]))
    assert d.tokens == [*tokens[1:], 99]
    assert d.bias_limit == 2  # the tail stays unbiased
    whole = prepare_draft(b, request(draft_tokens=tokens, extra_draft=[99],
                                     options=TranslateOptions(unbiased_tail=False)))
    assert whole.bias_limit == 4


def test_glossary_terms_join_the_chain_first() -> None:
    b = FakeBackend()
    base = DrafterChain([], budget=4)
    d = prepare_draft(b, request(chain=base, terms=[Term("board", "Vorstand")]))
    assert isinstance(d.chain, DrafterChain)
    assert isinstance(d.chain.drafters[0], GlossaryContinuation)
    assert d.drafter_beta == {GlossaryContinuation.name: GLOSSARY_BETA}
    off = prepare_draft(b, request(chain=base, terms=[Term("board", "Vorstand")],
                                   options=TranslateOptions(glossary_steps=("prompt",))))
    assert off.chain is base and off.drafter_beta is None
    assert with_glossary(None, [], 6).budget == 6
