"""The verify step: one generation that verifies the draft and decodes past it.

Every attempt of an update (the first, a final's retry, a glossary repair) is one call to
``generate``, so what an attempt means is written once: the prompt's stop strings, the
length cap that stops runaway outputs, the forced prefix of append-only text (the end of
the prompt, continued by a new word only), and, for an instruction model's answer, the
framing stops during decoding and the framing taken off after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.engine.timings import timed
from app.translation.backend import GenerationRequest, GenerationResult, TranslationBackend
from app.translation.display import display_unit
from app.translation.framing import answer_begun, clean_framing
from app.translation.options import TranslateOptions
from app.translation.prompts import TranslationPrompt, tokenize_prompt


def translation_token_cap(backend: TranslationBackend, source: str) -> int:
    """A translation is not many times longer than its source: cap runaway outputs."""
    return 3 * len(backend.tokenize(source)) + 16


def cleans(prompt: TranslationPrompt, opts: TranslateOptions) -> bool:
    """Whether an answer to ``prompt`` is cleaned of framing (``app.translation.framing``):
    an instruction model's answer, unless the options turn cleaning off."""
    return prompt.clean_framing and opts.framing.clean_framing


def new_word(backend: TranslationBackend) -> Callable[[int], bool]:
    """Which tokens may follow a forced prefix of whole words: one that begins a new word
    (a leading space), punctuation, or one with no text (the end of the answer); never one
    that extends the last forced word ("Hund" + "es" would revise a committed word)."""
    seen: dict[int, bool] = {}

    def allowed(token: int) -> bool:
        if token not in seen:
            piece = backend.token_bytes(token)
            first = piece.decode("utf-8", "ignore")[:1]
            seen[token] = not piece or (bool(first) and not first.isalnum())
        return seen[token]

    return allowed


def forced_answer(backend: TranslationBackend, forced: Sequence[int]) -> str:
    """The text of forced answer tokens, as the engine streams text (their bytes), so that
    the whole answer's text is this text followed by the continuation's."""
    return b"".join(backend.token_bytes(t) for t in forced).decode("utf-8", "replace")


async def generate(backend: TranslationBackend, prompt: TranslationPrompt,
                   opts: TranslateOptions, beta: float, draft: list[int], bias_limit: int,
                   chain: object | None, cancel: threading.Event | None,
                   on_text: Callable[[str], None] | None,
                   drafter_beta: dict[str, float] | None = None,
                   forced: Sequence[int] = (), one_off: bool = False,
                   give_up: Callable[[str], str | None] | None = None) -> GenerationResult:
    """One generation of ``prompt``'s answer. ``forced`` (append-only text,
    ``app.translation.commit_policy``) are tokens the answer must start with: they end the
    prompt, so the model continues them (a hard constraint, no logits row spent on them),
    ``draft`` is what should follow them, and the result is the whole answer, ``forced``
    included. ``one_off``: no later prompt extends this one (a retry's), so it leaves the
    session's cached prompt alone (``GenerationRequest.one_off``). ``give_up``: ends an
    answer that is already no translation (``GenerationRequest.give_up``)."""
    limits = opts.limits
    stops = tuple(prompt.stop_strings)
    if prompt.stop_at_newline:
        stops += ("\n",)
    with timed("tokenize_ms"):
        prompt_tokens = tokenize_prompt(prompt, backend.tokenize) + list(forced)
        cap = translation_token_cap(backend, prompt.source)
    forced_text = forced_answer(backend, forced)
    if forced_text and on_text is not None:
        on_text(forced_text)

    def begun(before: str) -> bool:  # the forced words are the answer begun
        return answer_begun(forced_text + before, prompt.source)

    cleaned = cleans(prompt, opts)
    result = await backend.generate(GenerationRequest(
        prompt_tokens=prompt_tokens,
        max_tokens=max(1, min(limits.max_tokens, cap) - len(forced)),
        stop_strings=stops,
        client_stops=tuple(limits.stop),
        draft=draft,
        beta=beta,
        bias_limit=bias_limit,
        temperature=limits.temperature,
        seed=limits.seed,
        drafters=chain,
        drafter_beta=drafter_beta or {},
        draft_budget=opts.drafting.draft_budget,
        previous=draft,
        cancel=cancel,
        on_text=on_text,
        stop_on_loop=True,
        first_token=new_word(backend)
        if forced and display_unit(opts.languages.target_lang) == "word" else None,
        answer_stops=prompt.answer_stops if cleaned else (),
        answer_begun=begun if cleaned else None,
        one_off=one_off,
        give_up=give_up,
    ))
    if forced:
        result = replace(result, tokens=[*forced, *result.tokens],
                         text=forced_text + result.text)
    if cleaned:
        text = clean_framing(result.text, prompt.source).text
        if text.strip().startswith(forced_text.strip()):  # committed words stay
            result = replace(result, text=text)
    return result
