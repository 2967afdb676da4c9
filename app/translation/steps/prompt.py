"""The prompt step: what one update is translated with, planned before its job.

The server and the eval harness must prompt alike, or what eval measures is not what
viewers get; so this is the one place an update's prompt is made: the talk so far (the
session's or the client's earlier pairs, bounded whatever the client sends) and the
glossary entries that apply to the source, both as data before it, plus what a final
needs if it goes wrong (the stronger retry prompt, the prompt with missing terms written
in) and the prompt's example pairs for the leakage detector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.translation.glossary import Term, applicable, with_target_terms
from app.translation.options import TranslateOptions
from app.translation.prompts import PromptFormat, TranslationPrompt


@dataclass
class PromptPlan:
    """What one update is translated with: its prompt, the stronger prompt a bad final
    is retried with (finals only), the glossary entries that apply and every example
    pair the two prompts show, the talk's context included (for the leakage detector)."""

    prompt: TranslationPrompt
    retry: TranslationPrompt | None
    terms: list[Term]
    examples: list[tuple[str, str]]
    # the prompt with the given source terms replaced by their target terms in the source
    # (a final's glossary repair, finals only)
    term_prompt: Callable[[list[str]], TranslationPrompt] | None = None


def bounded_context(pairs: list[tuple[str, str]], n: int,
                    max_chars: int) -> list[tuple[str, str]]:
    """The latest ``n`` pairs that fit ``max_chars`` together (the oldest go first),
    oldest first: context is bounded whatever the client sends."""
    kept: list[tuple[str, str]] = []
    used = 0
    for src, tgt in reversed(pairs[-n:] if n > 0 else []):
        used += len(src) + len(tgt)
        if used > max_chars:
            break
        kept.append((src, tgt))
    return kept[::-1]


def plan_prompt(fmt: PromptFormat, source: str, opts: TranslateOptions,
                context: list[tuple[str, str]], is_final: bool,
                max_context_chars: int) -> PromptPlan:
    """The one place an update's prompt is made (the server and the eval harness): the
    talk so far (``opts.context`` of ``context``'s pairs, bounded) and the glossary
    entries that apply to ``source``, both as data before it."""
    talk, langs = opts.talk, opts.languages
    pairs = bounded_context(context, talk.context, max_context_chars)
    terms = applicable(talk.glossary, source)
    shown = [(t.source, t.target) for t in terms] if "prompt" in talk.glossary_steps else []
    src, tgt = langs.source_lang, langs.target_lang

    def term_prompt(missing: list[str]) -> TranslationPrompt:
        return fmt.translation(with_target_terms(source, terms, missing), src, tgt,
                               context=pairs, terms=shown)

    return PromptPlan(
        prompt=fmt.translation(source, src, tgt, context=pairs, terms=shown),
        retry=fmt.retry_translation(source, src, tgt, context=pairs, terms=shown)
        if is_final else None,
        # the context pairs are examples too: a final that repeats an earlier final's
        # translation for another source is no translation (seen on ACL ja with context)
        terms=terms, examples=fmt.shown_examples(src, tgt) + pairs,
        term_prompt=term_prompt if is_final and terms else None)
