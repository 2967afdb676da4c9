"""The update's steps in order: the job that ``run_update`` runs.

Kept short on purpose: each line is one named step (``app.translation.steps``), so the
order of the final policy reads here and what each step does reads in its module. The
steps run in the same order and with the same inputs as the single function they were
cut from, so the outputs are the same token for token.
"""

from __future__ import annotations

from app.translation.backend import TranslationBackend
from app.translation.steps.commit import commit_step
from app.translation.steps.cut import cut_step
from app.translation.steps.display import caption_step
from app.translation.steps.draft import prepare_draft
from app.translation.steps.repair import repair_step
from app.translation.steps.request import UpdateOutcome, UpdateRequest
from app.translation.steps.retry import retry_step
from app.translation.steps.verdict import Verdict, diagnose_output
from app.translation.steps.verify import cleans, generate, translation_token_cap


async def first_attempt(backend: TranslationBackend, req: UpdateRequest) -> Verdict:
    """The draft and verify steps, and the verdict on their output."""
    opts = req.options
    draft = prepare_draft(backend, req)
    result = await generate(backend, req.prompt, opts, opts.drafting.beta_for(req.is_final),
                            draft.tokens, draft.bias_limit, draft.chain, req.cancel,
                            req.on_text, draft.drafter_beta, req.forced)
    cap = translation_token_cap(backend, req.source)
    pathology = diagnose_output(result, req.source, opts, req.examples, cap,
                                req.prompt.clean_framing)
    # Not for a streamed answer (``on_text``): its text is out already and cannot change.
    repairable = req.is_final and not req.streamed and result.finish_reason != "cancelled"
    return Verdict(result, pathology, cap, repairable)


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
