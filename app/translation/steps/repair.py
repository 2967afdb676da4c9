"""The repair step: a final that misses glossary terms, decoded once more.

An organiser's glossary is a promise to the audience ("the Board" is always "der
Vorstand"). Drafting the terms (the draft step) makes a begun term right; a final that
still misses one gets up to two more attempts: first the source with the missing terms
already written in the target language (``PromptPlan.term_prompt``), which the model
carries over where they belong; then, for what is still missing, the stronger prompt with
the terms proposed wherever the model may begin them (``GlossaryStart``). A repair is kept
when it is clean and misses fewer terms; a final that still misses one is the
``glossary_miss`` pathology.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from app.translation.backend import GenerationResult, TranslationBackend
from app.translation.glossary import Term, missed
from app.translation.options import TranslateOptions
from app.translation.prompts import TranslationPrompt
from app.translation.steps.draft import GLOSSARY_BETA, no_bos
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verdict import Verdict, diagnose_output, is_clean, merged
from app.translation.steps.verify import generate
from drafters.chain import DrafterChain
from drafters.glossary import GlossaryContinuation, GlossaryStart

# A final that still misses a term is decoded once more with the whole term proposed
# wherever the model ranks its first token close enough (within beta / (1 - beta) = 0.43
# of the top token's probability).
GLOSSARY_START_BETA = 0.3


async def repair_terms(backend: TranslationBackend, first: GenerationResult,
                       prompt: TranslationPrompt, opts: TranslateOptions, terms: list[Term],
                       missing: list[str], examples: list[tuple[str, str]] | None,
                       cancel: threading.Event | None, cap: int,
                       propose_start: bool = True, forced: Sequence[int] = (),
                       ) -> tuple[GenerationResult, list[str], float]:
    """A final that missed glossary terms, decoded once more with ``prompt``: from scratch,
    unbiased except for the terms, which are proposed wherever the model may begin them
    (``GlossaryStart``, when ``propose_start``) and completed once begun. Kept when it is
    clean and misses fewer terms; returns the result to keep (``first`` itself when the
    repair is not kept), the terms it misses and what the repair cost."""
    wanted = [term.target for term in terms if term.source in missing]
    drafters: list[object] = [
        GlossaryContinuation([t.target for t in terms], no_bos(backend), backend.detokenize)]
    if propose_start:
        drafters.append(GlossaryStart(wanted, no_bos(backend), backend.detokenize))
    chain = DrafterChain(drafters, budget=opts.drafting.draft_budget)
    again = await generate(backend, prompt, opts, 0.0, [], 0, chain, cancel, None,
                           {GlossaryContinuation.name: GLOSSARY_BETA,
                            GlossaryStart.name: GLOSSARY_START_BETA}, forced)
    still = missed(terms, again.text)
    clean = diagnose_output(again, prompt.source, opts, examples, cap,
                            prompt.clean_framing) is None
    if clean and is_clean(again) and len(still) < len(missing):
        merged(again, first, with_drafts=True)
        return again, still, again.decode_ms - first.decode_ms
    merged(first, again, with_drafts=False)
    return first, missing, again.decode_ms


def should_repair(req: UpdateRequest, verdict: Verdict) -> bool:
    """A repairable final that misses terms, with retries and the ``repair`` step on (also
    a final that is still a copy or a loop: a repair that is clean and misses fewer terms
    is a better final on both counts)."""
    opts = req.options
    return (verdict.repairable and bool(verdict.missing) and opts.finals.final_retry
            and "repair" in opts.talk.glossary_steps)


async def repair_step(backend: TranslationBackend, req: UpdateRequest,
                      verdict: Verdict) -> Verdict:
    """The repair step: ``verdict.missing`` set from the text, the repairs run when due,
    and a final still missing a term (and otherwise fine) marked ``glossary_miss``."""
    verdict = replace(verdict, missing=missed(req.terms, verdict.result.text))
    if should_repair(req, verdict):
        verdict = replace(verdict, retried=verdict.retried or "glossary_miss")
        attempts = [(req.term_prompt(verdict.missing), False)] \
            if req.term_prompt is not None else []
        attempts.append((req.retry_prompt or req.prompt, True))
        for attempt, propose_start in attempts:
            repaired, still, extra_ms = await repair_terms(
                backend, verdict.result, attempt, req.options, req.terms, verdict.missing,
                req.examples, req.cancel, verdict.cap, propose_start=propose_start,
                forced=req.forced)
            verdict = replace(verdict, retry_ms=verdict.retry_ms + extra_ms)
            if repaired is not verdict.result:  # kept: clean, and fewer terms missed
                verdict = replace(verdict, result=repaired, missing=still, pathology=None,
                                  cut=False)
            if not verdict.missing:
                break
    if req.is_final and verdict.missing and verdict.pathology is None:
        verdict = replace(verdict, pathology="glossary_miss")
    return verdict
