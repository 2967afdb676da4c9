"""The display step: the caption, held back on partials, and display-only mask-k."""

from __future__ import annotations

from app.translation.options import TranslateOptions
from app.translation.steps.display import caption_step, masked_tokens, shown_tokens
from app.translation.steps.request import UpdateRequest
from tests.app.translation.steps.fakes import FakeBackend, prompt


def request(is_final: bool, clean: bool = False, mask_k: int = 1) -> UpdateRequest:
    return UpdateRequest(prompt=prompt("The dog runs fast.", clean_framing=clean),
                         options=TranslateOptions(mask_k=mask_k), is_final=is_final)


def test_masked_tokens() -> None:
    assert masked_tokens([1, 2, 3, 4], 3, False) == [1]
    assert masked_tokens([1, 2, 3, 4], 3, True) == [1, 2, 3, 4]
    assert masked_tokens([1, 2], 0, False) == [1, 2]


def test_shown_tokens_are_the_cleaned_texts_own() -> None:
    b = FakeBackend()
    r = b.result(" Der Hund")
    assert shown_tokens(b, r) == r.tokens
    framed = b.result(' "Der Hund"')
    framed.text = "Der Hund"
    assert b.detokenize(shown_tokens(b, framed)) == "Der Hund"


def test_a_partial_hides_its_last_mask_k_tokens_from_the_viewer_only() -> None:
    b = FakeBackend()
    r = b.result(" Der Hund läuft")
    c = caption_step(b, request(False), r)
    assert c.text == "Der Hund läuft" and c.display == "Der Hund"
    assert c.tokens == r.tokens == c.text_tokens
    final = caption_step(b, request(True), r)
    assert final.display == "Der Hund läuft"


def test_a_partial_that_may_become_framing_is_held_back() -> None:
    b = FakeBackend()
    c = caption_step(b, request(False, clean=True, mask_k=0), b.result("Hier ist die"))
    assert c.text == "" and c.text_tokens == [] and c.display == ""
    assert b.detokenize(c.tokens) == "Hier ist die"  # the draft is still the output
