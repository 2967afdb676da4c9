"""Translation requests -> backend jobs, shared by the HTTP endpoint and the WebSocket.

This is where a request's options become a ``GenerationRequest``: the prompt format renders
the source, the draft comes from the session's ``plan_draft`` (or from the client's
``prediction``), the drafter chain is assembled from the requested names, and after the job
``Session.commit`` makes the new translation the next update's draft. Display-only mask-k is
computed here too: the viewer's text omits the last ``mask_k`` tokens of a non-final
translation, while the draft keeps them.

The path, one name per step: ``Translator.translate`` (the event loop: session, prompt,
draft plan) -> ``BackendRunner.run`` (where the model lives) -> ``run_update`` (the job, a
task on the event loop: tokens, generation, verdict, retry) -> ``await
TranslationBackend.generate`` (a future the model's scheduler completes). The
backend is a protocol (``app.translation.backend``); llama.cpp is its first
implementation (``app.translation.llama_backend``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from app.engine.timings import current_timings, timed
from app.translation.backend import (
    PRIORITY_REQUEST,
    BackendRunner,
    GenerationRequest,
    GenerationResult,
    TranslationBackend,
)
from app.translation.display import display_unit
from app.translation.framing import (
    StreamCleaner,
    answer_begun,
    clean_framing,
    cut_framing,
    held_back,
)
from app.translation.glossary import Term, applicable, missed, with_target_terms
from app.translation.options import DEFAULT_OPTIONS, TranslateOptions
from app.translation.pathology import (
    FRAMING_KINDS,
    diagnose,
    fit_for_context,
    loop_cut,
    loops,
)
from app.translation.prompts import (
    PromptFormat,
    TranslationPrompt,
    render_plain_chat,
    tokenize_prompt,
)
from app.translation.sessions import DraftPlan, Session, SessionStore
from drafters.chain import DEFAULT_ORDER, DrafterChain
from drafters.glossary import GlossaryContinuation, GlossaryStart

# What callers import from here; the options live in ``app.translation.options``.
__all__ = ["DEFAULT_OPTIONS", "TranslateOptions", "TranslationOutcome", "Translator",
           "UpdateOutcome", "masked_tokens", "next_draft", "plan_prompt", "run_update",
           "trailing_punctuation", "update_beta"]

ChainFactory = Callable[[list[str], str], object | None]

# The bias a glossary term is verified with once the model has begun it: at 0.5 or more
# the term's own next token always wins (``app.engine.verify``), so a begun term is written
# as the glossary spells it. A final that still misses a term is decoded once more with
# the whole term proposed wherever the model ranks its first token close enough
# (GLOSSARY_START_BETA: within beta / (1 - beta) = 0.43 of the top token's probability).
GLOSSARY_BETA = 0.5
GLOSSARY_START_BETA = 0.3

# A client's ``prediction`` has no history: under ``bias_scope="agreed"`` all of it is agreed.
PREDICTION_AGREED = 1 << 30


@dataclass
class TranslationOutcome:
    result: GenerationResult
    text: str
    display_text: str
    revision: int
    session_id: str | None
    is_final: bool
    queue_ms: float = 0.0
    extra: dict = field(default_factory=dict)
    pathology: str | None = None  # see ``app.translation.pathology``: what is wrong with it
    draft_dropped: str | None = None  # why this output is not the next draft
    retried: str | None = None  # a final translated again from scratch, and why
    # {"applied": n, "missed": [source terms]} when the request had a glossary
    glossary: dict | None = None
    # the tokens of ``text`` (for a display policy that counts tokens); None: the result's
    shown_tokens: list[int] | None = None


def masked_tokens(tokens: list[int], mask_k: int, is_final: bool) -> list[int]:
    """Tokens the viewer sees: all of a final, all but the last ``mask_k`` otherwise."""
    if is_final or mask_k <= 0:
        return tokens
    return tokens[: max(0, len(tokens) - mask_k)]


TERMINAL_PUNCT = frozenset(".!?。！？…")


def trailing_punctuation(backend: TranslationBackend, tokens: list[int]) -> int:
    """How many tokens at the end of ``tokens`` are only sentence-final punctuation."""
    n = 0
    for tok in reversed(tokens):
        piece = backend.token_bytes(tok).decode("utf-8", "ignore").strip()
        if piece and all(ch in TERMINAL_PUNCT for ch in piece):
            n += 1
        else:
            break
    return n


def next_draft(result: GenerationResult, pathology: str | None = None) -> list[int]:
    """What the next update of the segment may use as its draft.

    A runaway output (cut at the length cap, or ended by the loop detector) is no
    translation: biased verification would keep it and grow it by a few tokens per update
    (measured: a 4-word source that looped into "Am Sonntag, am Dienstag, am Mittwoch, ..."
    stayed a 163-token list of weekdays for the rest of the sentence at beta 0.2), and even
    unbiased, verifying it costs one logits row per token for nothing. The same holds for
    any output ``app.translation.pathology`` diagnoses (a copy of the source, a prompt example, the
    wrong script): biased, the draft would carry it to the final. It is dropped.
    """
    return [] if (result.runaway or pathology) else list(result.tokens)


def translation_token_cap(backend: TranslationBackend, source: str) -> int:
    """A translation is not many times longer than its source: cap runaway outputs."""
    return 3 * len(backend.tokenize(source)) + 16


def update_beta(opts: TranslateOptions, is_final: bool) -> float:
    """The beta an update is verified with (``Drafting.beta_for``)."""
    return opts.drafting.beta_for(is_final)


@dataclass
class UpdateOutcome:
    """One translated update: the engine result plus what the translator made of it."""

    result: GenerationResult
    display: str  # what a viewer sees (display-only mask-k applied)
    pathology: str | None = None  # what ``app.translation.pathology`` found in the output
    retried: str | None = None  # the first attempt's pathology when a final was retried
    retry_ms: float = 0.0  # what the retry cost (included in ``result.decode_ms``)
    draft: list[int] = field(default_factory=list)  # the next update's draft
    dropped: str | None = None  # why the output is no draft ("loop", "copy", ...)
    cut: bool = False  # a looping final's text was cut where the loop starts
    terms: list[Term] = field(default_factory=list)  # glossary entries that applied
    missed: list[str] = field(default_factory=list)  # ... whose target term is not out
    # the caption's text and tokens: the answer, or an instruction model's answer without
    # its framing (and, for a partial, without a tail that may still become framing)
    caption: str | None = None
    shown_tokens: list[int] = field(default_factory=list)


async def _generate(backend: TranslationBackend, prompt: TranslationPrompt,
                    opts: TranslateOptions,
              beta: float, draft: list[int], bias_limit: int, chain: object | None,
              cancel: threading.Event | None,
              on_text: Callable[[str], None] | None,
              drafter_beta: dict[str, float] | None = None,
              forced: Sequence[int] = ()) -> GenerationResult:
    """One generation of ``prompt``'s answer. ``forced`` (append-only text,
    ``app.translation.commit_policy``) are tokens the answer must start with: they end the prompt,
    so the model continues them (a hard constraint, no logits row spent on them), ``draft``
    is what should follow them, and the result is the whole answer, ``forced`` included."""
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

    result = await backend.generate(GenerationRequest(
        prompt_tokens=prompt_tokens,
        max_tokens=max(1, min(opts.max_tokens, cap) - len(forced)),
        stop_strings=stops,
        client_stops=tuple(opts.stop),
        draft=draft,
        beta=beta,
        bias_limit=bias_limit,
        temperature=opts.temperature,
        seed=opts.seed,
        drafters=chain,
        drafter_beta=drafter_beta or {},
        draft_budget=opts.draft_budget,
        previous=draft,
        cancel=cancel,
        on_text=on_text,
        stop_on_loop=True,
        first_token=new_word(backend) if forced and display_unit(opts.target_lang) == "word"
        else None,
        answer_stops=prompt.answer_stops if cleans(prompt, opts) else (),
        answer_begun=begun if cleans(prompt, opts) else None,
    ))
    if forced:
        result = replace(result, tokens=[*forced, *result.tokens],
                         text=forced_text + result.text)
    if cleans(prompt, opts):
        cleaned = clean_framing(result.text, prompt.source).text
        if cleaned.strip().startswith(forced_text.strip()):  # committed words stay
            result = replace(result, text=cleaned)
    return result


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


def continuation(draft: list[int], agreed: int | None,
                 forced: Sequence[int]) -> tuple[list[int], int | None]:
    """The draft of what follows ``forced``: the previous output past the forced prefix
    (its agreed part shortened alike), or nothing when that output did not start with it."""
    if not forced:
        return draft, agreed
    if draft[: len(forced)] != list(forced):
        return [], 0
    return draft[len(forced):], None if agreed is None else max(0, agreed - len(forced))


def cleans(prompt: TranslationPrompt, opts: TranslateOptions) -> bool:
    """Whether an answer to ``prompt`` is cleaned of framing (``app.translation.framing``):
    an instruction model's answer, unless the options turn cleaning off."""
    return prompt.clean_framing and opts.clean_framing


def shown_tokens(backend: TranslationBackend, result: GenerationResult) -> list[int]:
    """The tokens of what the caption shows: the decoded tokens, or, where cleaning took
    framing off, the cleaned text's own tokens (the next draft is the cleaned translation,
    never a label or a quote the model wrapped round it)."""
    if backend.detokenize(result.tokens).strip() == result.text.strip():
        return list(result.tokens)
    return backend.tokenize(result.text.strip(), add_bos=False) if result.text.strip() else []


async def run_update(
    backend: TranslationBackend,
    prompt: TranslationPrompt,
    opts: TranslateOptions,
    is_final: bool,
    *,
    draft_tokens: list[int] | None = None,
    draft_text: str | None = None,
    chain: object | None = None,
    cancel: threading.Event | None = None,
    on_text: Callable[[str], None] | None = None,
    extra_draft: list[int] | None = None,
    draft_agreed: int | None = None,
    examples: list[tuple[str, str]] | None = None,
    retry_prompt: TranslationPrompt | None = None,
    terms: list[Term] | None = None,
    term_prompt: Callable[[list[str]], TranslationPrompt] | None = None,
    forced: Sequence[int] = (),
) -> UpdateOutcome:
    """One update on the backend, as a job: the exact code path of the server
    (``Translator.translate``'s job, a task on the event loop awaiting the step scheduler)
    and of the benchmarks (a ``StandaloneLlamaBackend``, driven by ``run_to_end``).

    ``examples`` are the prompt's example pairs (for the leakage detector); ``retry_prompt``
    is the stronger prompt a pathological final is translated again with, from scratch
    (``opts.final_retry``, every kind including ``loop``); the retry's answer is kept only
    when it is clean. A final that still loops is cut where the loop starts (``cut_loop``).
    A streamed update (``on_text``) is neither retried nor cut: its text has gone out
    already. A looping output is never the next draft.

    ``terms`` are the glossary entries that apply to the source: their target terms are
    drafted where the model begins them (``drafters.glossary``, verified with
    ``GLOSSARY_BETA``), and a final that still misses one is decoded once more with the
    terms proposed throughout (``_repair_terms``); one that misses a term after that is
    the ``glossary_miss`` pathology.

    ``forced`` (append-only text): the segment's committed tokens, which every attempt's
    answer starts with (retries and repairs too); the draft is the previous output past
    them, still verified by SSBD. The outcome's tokens and text include them.
    """
    draft = list(draft_tokens) if draft_tokens is not None else []
    if draft_tokens is None and draft_text:
        if prompt.stop_at_newline and not draft_text.startswith(" "):
            draft_text = " " + draft_text  # few-shot answers start with " Der", not "Der"
        with timed("tokenize_ms"):
            draft = backend.tokenize(draft_text, add_bos=False)
    draft, draft_agreed = continuation(draft, draft_agreed, forced)
    if opts.mask_mode == "draft" and opts.mask_k > 0:
        draft = draft[: max(0, len(draft) - opts.mask_k)]
    # The draft's end is no evidence that the translation ends there: sentence-final
    # punctuation at the very end of the draft is verified without bias.
    bias_limit = len(draft) - (trailing_punctuation(backend, draft) if opts.unbiased_tail else 0)
    if opts.bias_scope == "agreed":
        bias_limit = min(bias_limit, draft_agreed or 0)
    if extra_draft:
        draft = draft + list(extra_draft)  # benchmarks only: e.g. the old stop token
        bias_limit = len(draft) if not opts.unbiased_tail else bias_limit
    terms = terms or []
    drafter_beta = None
    if terms and "draft" in opts.glossary_steps:
        chain = with_glossary(chain, [GlossaryContinuation(
            [t.target for t in terms], _no_bos(backend), backend.detokenize)],
            opts.draft_budget)
        drafter_beta = {GlossaryContinuation.name: GLOSSARY_BETA}
    result = await _generate(backend, prompt, opts, update_beta(opts, is_final), draft,
                             bias_limit, chain, cancel, on_text, drafter_beta, forced)
    cap = translation_token_cap(backend, prompt.source)
    framing = prompt.clean_framing
    pathology = diagnose_output(result, prompt.source, opts, examples, cap, framing)
    retried, retry_ms, cut = None, 0.0, False
    # Not for a streamed answer (``on_text``): its text is out already and cannot change.
    repairable = is_final and on_text is None and result.finish_reason != "cancelled"
    # framing with cleaning off is only counted (what the caption would have shown)
    acted_on = pathology not in FRAMING_KINDS or cleans(prompt, opts)
    if repairable and pathology and acted_on and opts.final_retry and \
            retry_prompt is not None:
        retried = pathology
        result, pathology, retry_ms = await _retry(backend, result, pathology, prompt.source,
                                                   opts, examples, retry_prompt, cancel, cap,
                                                   forced)
    if repairable and pathology == "loop" and opts.final_retry:
        result, cut = cut_loop(result, ran_away(result, opts, cap))
    if is_final and pathology in FRAMING_KINDS and cleans(prompt, opts):
        # still framed after the retry: the caption ends where the framing starts
        result, cut = replace(result, text=cut_framing(result.text, prompt.source)), True
    missing = missed(terms, result.text)
    if repairable and missing and opts.final_retry and "repair" in opts.glossary_steps:
        # also for a final that is still a copy or a loop: a repair that is clean and
        # misses fewer terms is a better final on both counts
        retried = retried or "glossary_miss"
        # first the source with the missing terms already in the target language, which
        # the model carries over where they belong; then, for what is still missing, the
        # terms proposed wherever the model may begin them
        attempts = [(term_prompt(missing), False)] if term_prompt is not None else []
        attempts.append((retry_prompt or prompt, True))
        for attempt, propose_start in attempts:
            repaired, still, extra_ms = await _repair_terms(
                backend, result, attempt, opts, terms, missing, examples, cancel, cap,
                propose_start=propose_start, forced=forced)
            retry_ms += extra_ms
            if repaired is not result:  # kept: clean, and fewer terms missed
                result, missing, pathology, cut = repaired, still, None, False
            if not missing:
                break
    if is_final and missing and pathology is None:
        pathology = "glossary_miss"
    cleaned = cleans(prompt, opts)
    tokens = shown_tokens(backend, result) if cleaned else list(result.tokens)
    caption, caption_tokens = result.text.strip(), tokens
    if cleaned and not is_final:  # no "Here is" flickers in: held back until it cannot be
        caption = held_back(cut_framing(caption, prompt.source), prompt.source,
                            opts.target_lang)
        if caption != result.text.strip():
            caption_tokens = backend.tokenize(caption, add_bos=False) if caption else []
    shown = masked_tokens(caption_tokens, opts.mask_k, is_final)
    display = caption if len(shown) == len(caption_tokens) else backend.detokenize(shown)
    guard = pathology if opts.draft_guard else None
    # a loop is no draft whatever the guard: biased, the next update would keep repeating it
    if pathology == "loop":
        guard = "loop"
    # nor is framing: a draft carries it forward
    if pathology in FRAMING_KINDS and cleaned:
        guard = pathology
    dropped = "loop" if result.runaway else guard
    draft = tokens if next_draft(result, guard) else []
    return UpdateOutcome(result=result, display=display.strip(), pathology=pathology,
                         retried=retried, retry_ms=retry_ms, draft=draft,
                         dropped=dropped, cut=cut, terms=terms, missed=missing,
                         caption=caption, shown_tokens=caption_tokens)


def _no_bos(backend: TranslationBackend) -> Callable[[str], list[int]]:
    return lambda text: backend.tokenize(text, add_bos=False)


def with_glossary(chain: object | None, drafters: list[object], budget: int) -> DrafterChain:
    """The request's drafter chain with the glossary drafters first (a term, once begun,
    outranks every other proposal)."""
    base = list(getattr(chain, "drafters", []) or [])
    return DrafterChain([*drafters, *base], budget=getattr(chain, "budget", budget))


async def _repair_terms(backend: TranslationBackend, first: GenerationResult,
                        prompt: TranslationPrompt, opts: TranslateOptions, terms: list[Term],
                        missing: list[str], examples: list[tuple[str, str]] | None,
                        cancel: threading.Event | None, cap: int,
                        propose_start: bool = True, forced: Sequence[int] = (),
                        ) -> tuple[GenerationResult, list[str], float]:
    """A final that missed glossary terms, decoded once more with ``prompt`` (the stronger
    retry prompt, where there is one): from scratch, unbiased except for the terms, which
    are proposed wherever the model may begin them (``GlossaryStart``) and completed once
    begun. Kept when it is clean and misses fewer terms; returns the result to keep (``first``
    itself when the repair is not kept), the terms it misses and what the repair cost."""
    wanted = [term.target for term in terms if term.source in missing]
    drafters: list[object] = [
        GlossaryContinuation([t.target for t in terms], _no_bos(backend), backend.detokenize)]
    if propose_start:
        drafters.append(GlossaryStart(wanted, _no_bos(backend), backend.detokenize))
    chain = DrafterChain(drafters, budget=opts.draft_budget)
    again = await _generate(backend, prompt, opts, 0.0, [], 0, chain, cancel, None,
                      {GlossaryContinuation.name: GLOSSARY_BETA,
                       GlossaryStart.name: GLOSSARY_START_BETA}, forced)
    still = missed(terms, again.text)
    clean = diagnose_output(again, prompt.source, opts, examples, cap,
                            prompt.clean_framing) is None
    if clean and again.text.strip() and again.finish_reason != "cancelled" and \
            len(still) < len(missing):
        again.decode_ms += first.decode_ms
        again.forward_passes += first.forward_passes
        again.drafts.merge(first.drafts)
        return again, still, again.decode_ms - first.decode_ms
    first.decode_ms += again.decode_ms
    first.forward_passes += again.forward_passes
    return first, missing, again.decode_ms


async def _retry(backend: TranslationBackend, first: GenerationResult, pathology: str,
                 source: str, opts: TranslateOptions,
                 examples: list[tuple[str, str]] | None, retry_prompt: TranslationPrompt,
                 cancel: threading.Event | None, cap: int,
                 forced: Sequence[int] = ()) -> tuple[GenerationResult, str | None, float]:
    """A pathological final translated once more: from scratch (no draft, no drafters),
    verified without bias, with the stronger prompt. Returns the result to keep, its
    pathology and what the retry cost.

    The retry's answer replaces the first only when it is clean, not empty and not
    cancelled; the kept result carries the decode time and forward passes of both attempts.
    """
    again = await _generate(backend, retry_prompt, opts, 0.0, [], 0, None, cancel, None,
                            forced=forced)
    verdict = diagnose_output(again, source, opts, examples, cap, retry_prompt.clean_framing)
    if verdict is None and again.text.strip() and again.finish_reason != "cancelled":
        again.decode_ms += first.decode_ms
        again.forward_passes += first.forward_passes
        again.drafts.merge(first.drafts)
        return again, None, again.decode_ms - first.decode_ms
    first.decode_ms += again.decode_ms
    first.forward_passes += again.forward_passes
    return first, pathology, again.decode_ms


def cut_loop(result: GenerationResult, runaway: bool) -> tuple[GenerationResult, bool]:
    """A looping final's text cut where the loop starts (``pathology.loop_cut``): the
    text before the repetition, with one copy of the repeated span. Returns the result
    and whether it was cut.

    Only the text changes: the tokens, usage and draft counts stay what the engine decoded
    (a final's tokens are no draft: its segment is over). An output that ran into the
    length cap without a repetition to cut at is left as it is.
    """
    end = loop_cut(result.text, runaway=runaway)
    if end is None:
        return result, False
    return replace(result, text=result.text[:end]), True


def ran_away(result: GenerationResult, opts: TranslateOptions, cap: int) -> bool:
    """The output was cut off rather than finished: the engine's loop detector ended it, or
    it reached the server's length cap ``cap`` (``translation_token_cap``). A client's own
    ``max_tokens`` below that cap truncates a translation where the client asked: that is
    no loop, and retrying it would only cost a second translation cut at the same length."""
    return result.looped or (result.finish_reason == "length" and opts.max_tokens >= cap)


def diagnose_output(result: GenerationResult, source: str, opts: TranslateOptions,
                    examples: list[tuple[str, str]] | None, cap: int,
                    framing: bool = False) -> str | None:
    """``app.translation.pathology.diagnose`` for a translation of ``source`` whose length cap was
    ``cap`` (only ``loop`` when the pair is one language: a copy is then no error);
    ``framing``: an instruction model's answer, checked for framing too."""
    runaway = ran_away(result, opts, cap)
    if opts.source_lang == opts.target_lang:
        return "loop" if runaway or loops(result.text) else None
    return diagnose(result.text, source, opts.target_lang, examples=examples or (),
                    runaway=runaway, framing=framing)


@dataclass
class PromptPlan:
    """What one update is translated with: its prompt, the stronger prompt a bad final
    is retried with (finals only), the glossary entries that apply and the prompt's
    example pairs (for the leakage detector)."""

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
    pairs = bounded_context(context, opts.context, max_context_chars)
    terms = applicable(opts.glossary, source)
    shown = [(t.source, t.target) for t in terms] if "prompt" in opts.glossary_steps else []
    src, tgt = opts.source_lang, opts.target_lang

    def term_prompt(missing: list[str]) -> TranslationPrompt:
        return fmt.translation(with_target_terms(source, terms, missing), src, tgt,
                               context=pairs, terms=shown)

    return PromptPlan(
        prompt=fmt.translation(source, src, tgt, context=pairs, terms=shown),
        retry=fmt.retry_translation(source, src, tgt, context=pairs, terms=shown)
        if is_final else None,
        # the context pairs are examples too: a final that repeats an earlier final's
        # translation for another source is no translation (seen on ACL ja with context)
        terms=terms, examples=fmt.examples(src, tgt) + pairs,
        term_prompt=term_prompt if is_final and terms else None)


class Translator:
    """Runs translation updates on a backend (through its runner), with session drafts."""

    def __init__(
        self,
        runner: BackendRunner,
        prompt_format: PromptFormat,
        sessions: SessionStore,
        chain_factory: ChainFactory | None = None,
        chat_renderer: Callable[[list[dict[str, str]]], TranslationPrompt] | None = None,
        max_context_chars: int = 2000,
    ) -> None:
        self.max_context_chars = max_context_chars
        self.runner = runner
        self.prompt_format = prompt_format
        self.sessions = sessions
        self.chain_factory = chain_factory
        self.chat_renderer = chat_renderer or render_plain_chat

    async def translate(
        self,
        source: str,
        opts: TranslateOptions,
        *,
        session_id: str | None = None,
        is_final: bool | None = None,
        owner: str | None = None,
        prediction: str | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        priority: int = PRIORITY_REQUEST,
        bypass_limit: bool = False,
        session: Session | None = None,
        started: threading.Event | None = None,
        queue_seq: int | None = None,
        seq: int | None = None,
        context: list[tuple[str, str]] | None = None,
        forced: Sequence[int] = (),
    ) -> TranslationOutcome:
        """Translate one update. With a session, its previous translation is the draft.

        ``context`` is a stateless request's earlier (source, translation) pairs; without
        it, a session's previous finals are the context (``opts.context`` of them).

        ``session`` may be passed by a caller that already holds it (the WebSocket, which
        owns its session for the connection's lifetime); otherwise it is acquired here.
        ``queue_seq`` (``EngineWorker.next_seq``) keeps the engine-queue position of a job
        this one supersedes; ``seq`` is the client's update counter, which the session
        records as applied together with the translation (README "Order of updates").

        ``forced`` (append-only text, ``app.translation.commit_policy``): tokens the answer must
        start with, the segment's committed text; the outcome's text starts with them.
        """
        final = (session_id is None and session is None) if is_final is None else is_final
        measured = current_timings.get()
        t_start = time.perf_counter()
        acquired = False
        if session is None and session_id is not None:
            session = self.sessions.acquire(session_id, owner)
            acquired = True
        try:
            plan = self._plan(session, opts, prediction)
            if context is None and session is not None:
                context = session.context(opts.target_lang, opts.source_lang, opts.context)
            p = plan_prompt(self.prompt_format, source, opts, context or [], final,
                            self.max_context_chars)
            prompt, retry_prompt, terms, examples = p.prompt, p.retry, p.terms, p.examples
            chain = self._chain(opts)
            streamed = None
            if on_text is not None and cleans(prompt, opts):  # the stream is cleaned too
                streamed = StreamCleaner(on_text, prompt.source, opts.target_lang)
                on_text = streamed.feed

            async def job(backend: TranslationBackend) -> UpdateOutcome:
                return await run_update(
                    backend, prompt, opts, final,
                    draft_tokens=plan.tokens if prediction is None else None,
                    draft_text=prediction, chain=chain, cancel=cancel, on_text=on_text,
                    draft_agreed=plan.agreed, examples=examples, retry_prompt=retry_prompt,
                    terms=terms, term_prompt=p.term_prompt, forced=forced,
                )

            if measured is not None:
                measured.since("prompt_ms", t_start)
            update: UpdateOutcome = await self.runner.run(
                job, priority=priority, cancel=cancel, bypass_limit=bypass_limit,
                started=started, queue_seq=queue_seq,
            )
            t_done = time.perf_counter()
            text = update.result.text.strip() if update.caption is None else update.caption
            if streamed is not None:
                streamed.finish(text)
            revision = 1
            if session is not None and update.result.finish_reason != "cancelled":
                revision = session.commit(
                    source, update.draft, final, opts.target_lang, opts.source_lang, seq=seq,
                    text=text if fit_for_context(update.pathology) else None)
            outcome = TranslationOutcome(
                result=update.result, text=text, display_text=update.display,
                revision=revision, session_id=session.session_id if session else None,
                is_final=final, pathology=update.pathology, draft_dropped=update.dropped,
                retried=update.retried, shown_tokens=update.shown_tokens,
                glossary=None if opts.glossary is None else {
                    "applied": len(update.terms), "missed": update.missed},
            )
            if measured is not None:
                measured.since("finish_ms", t_done)
            return outcome
        finally:
            if acquired and session is not None:
                self.sessions.release(session)

    @staticmethod
    def _plan(session: Session | None, opts: TranslateOptions,
              prediction: str | None) -> DraftPlan:
        """The draft of an update: the session's plan when the ``previous`` drafter is on.

        A client's ``prediction`` replaces it (its text is tokenized on the engine thread,
        so the plan has no tokens); it has no history, so all of it counts as agreed.
        """
        if prediction is not None:
            return DraftPlan(agreed=PREDICTION_AGREED)
        if session is not None and opts.uses("previous"):
            return session.plan_draft(opts.target_lang, opts.source_lang)
        return DraftPlan()

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: tuple[str, ...] = (),
        prediction: str | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        started: threading.Event | None = None,
    ) -> TranslationOutcome:
        """A plain chat completion on the loaded model (no ``target_lang``)."""
        prompt = self.chat_renderer(messages)

        async def job(backend: TranslationBackend) -> GenerationResult:
            tokens = tokenize_prompt(prompt, backend.tokenize)
            draft = backend.tokenize(prediction, add_bos=False) if prediction else []
            return await backend.generate(GenerationRequest(
                prompt_tokens=tokens, max_tokens=max_tokens,
                stop_strings=tuple(prompt.stop_strings), client_stops=tuple(stop),
                draft=draft, beta=0.0,
                temperature=temperature, seed=seed, cancel=cancel, on_text=on_text,
            ))

        result = await self.runner.run(job, cancel=cancel, started=started)
        return TranslationOutcome(
            result=result, text=result.text.strip(), display_text=result.text.strip(),
            revision=1, session_id=None, is_final=True,
        )

    def _chain(self, opts: TranslateOptions) -> object | None:
        if self.chain_factory is None:
            return None
        names = list(opts.drafters if opts.drafters is not None else DEFAULT_ORDER)
        if not names:
            return None
        return self.chain_factory(names, opts.target_lang)
