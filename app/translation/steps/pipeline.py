"""The update's steps in order: the job that ``run_update`` runs.

Kept short on purpose: each line is one named step (``app.translation.steps``), so the
order of the final policy reads here and what each step does reads in its module. The
steps run in the same order and with the same inputs as the single function they were
cut from, so the outputs are the same token for token.
"""

from __future__ import annotations

from collections.abc import Callable

from app.translation.backend import TranslationBackend
from app.translation.pathology import begins_as_copy
from app.translation.steps.commit import commit_step
from app.translation.steps.cut import cut_step
from app.translation.steps.display import caption_step
from app.translation.steps.draft import prepare_draft
from app.translation.steps.repair import repair_step
from app.translation.steps.request import UpdateOutcome, UpdateRequest
from app.translation.steps.retry import may_retry, retry_step
from app.translation.steps.verdict import Verdict, diagnose_output
from app.translation.steps.verify import cleans, generate, translation_token_cap


async def first_attempt(backend: TranslationBackend, req: UpdateRequest) -> Verdict:
    """The draft and verify steps, and the verdict on their output. A final that would be
    retried gives up an answer that begins as a copy of its source (``give_up_on``)."""
    opts = req.options
    draft = prepare_draft(backend, req)
    result = await generate(backend, req.prompt, opts, opts.drafting.beta_for(req.is_final),
                            draft.tokens, draft.bias_limit, draft.chain, req.cancel,
                            req.on_text, draft.drafter_beta, req.forced,
                            give_up=give_up_on(req))
    cap = translation_token_cap(backend, req.source)
    pathology = diagnose_output(result, req.source, opts, req.examples, cap,
                                req.prompt.clean_framing) or result.gave_up
    # Not for a streamed answer (``on_text``): its text is out already and cannot change.
    repairable = req.is_final and not req.streamed and result.finish_reason != "cancelled"
    return Verdict(result, pathology, cap, repairable)


def give_up_on(req: UpdateRequest) -> Callable[[str], str | None] | None:
    """For a final that a copy would send to the retry (``may_retry``), what ends its first
    attempt as soon as its words so far are all the source's
    (``app.translation.pathology.begins_as_copy``): the rest of a copy is decoded for
    nothing (on FLORES dev en-de about two thirds of a copy's tokens). None otherwise: an
    answer that is not retried is never cut short."""
    if not may_retry(req) or not req.options.finals.give_up_copies:
        return None
    source = req.source

    def give_up(words: str) -> str | None:
        return "copy" if begins_as_copy(words, source) else None

    return give_up


async def run_steps(backend: TranslationBackend, req: UpdateRequest) -> UpdateOutcome:
    """One update: draft, verify, retry, cut, repair, display, commit."""
    verdict = await first_attempt(backend, req)
    verdict = await retry_step(backend, req, verdict)
    verdict = cut_step(req, verdict)
    verdict = await repair_step(backend, req, verdict)
    caption = caption_step(backend, req, verdict.result)
    draft = commit_step(verdict.result, caption.tokens, verdict.pathology,
                        req.options.drafting.draft_guard, cleans(req.prompt, req.options))
    return UpdateOutcome(
        result=verdict.result, display=caption.display, pathology=verdict.pathology,
        retried=verdict.retried, retry_ms=verdict.retry_ms, draft=draft.tokens,
        dropped=draft.dropped, cut=verdict.cut, terms=req.terms, missed=verdict.missing,
        caption=caption.text, shown_tokens=caption.text_tokens)
