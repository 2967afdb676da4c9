"""The verify step: one generation, with the forced prefix and framing handled."""

from __future__ import annotations

import asyncio

from app.translation.options import TranslateOptions
from app.translation.steps.verify import (
    cleans,
    forced_answer,
    generate,
    new_word,
    translation_token_cap,
)
from tests.app.translation.steps.fakes import FakeBackend, prompt


def test_the_length_cap_follows_the_source() -> None:
    b = FakeBackend()
    assert translation_token_cap(b, "The dog runs.") == 3 * 3 + 16  # three words


def test_cleaning_needs_an_instruction_prompt_and_the_option() -> None:
    assert cleans(prompt("x", clean_framing=True), TranslateOptions())
    assert not cleans(prompt("x", clean_framing=True), TranslateOptions(clean_framing=False))
    assert not cleans(prompt("x"), TranslateOptions())


def test_a_forced_prefix_is_continued_by_a_new_word_only() -> None:
    b = FakeBackend()
    allowed = new_word(b)
    space, glued, punct = b.tokenize(" Hund"), b.tokenize("es"), b.tokenize(",")
    assert allowed(space[0]) and allowed(punct[0]) and not allowed(glued[0])
    assert forced_answer(b, b.tokenize(" Der Hund")) == " Der Hund"


def test_generate_ends_the_prompt_with_the_forced_tokens() -> None:
    b = FakeBackend()
    forced = b.tokenize(" Der Hund")
    b.results.append(b.result(" läuft."))
    streamed: list[str] = []
    out = asyncio.run(generate(b, prompt("The dog runs."), TranslateOptions(max_tokens=10),
                               0.2, [7], 1, None, None, streamed.append, forced=forced))
    req = b.requests[0]
    assert req.prompt_tokens[-2:] == forced
    assert req.max_tokens == 10 - 2 and req.beta == 0.2 and req.bias_limit == 1
    assert req.first_token is not None and req.stop_on_loop
    assert streamed == [" Der Hund"]
    assert out.text == " Der Hund läuft." and out.tokens[:2] == forced


def test_generate_takes_framing_off_an_instruction_answer() -> None:
    b = FakeBackend(FakeBackend().result("Here is the translation: Der Hund läuft."))
    out = asyncio.run(generate(b, prompt("The dog runs.", clean_framing=True),
                               TranslateOptions(), 0.0, [], 0, None, None, None))
    assert out.text == "Der Hund läuft."
    assert b.requests[0].answer_begun is not None
    plain = FakeBackend(FakeBackend().result("Here is the translation: Der Hund läuft."))
    kept = asyncio.run(generate(plain, prompt("The dog runs."), TranslateOptions(), 0.0, [], 0,
                                None, None, None))
    assert kept.text.startswith("Here is") and plain.requests[0].answer_stops == ()
