"""The retry step: a pathological final translated once more, from scratch.

A final is what every viewer keeps, so a final that is no translation (a loop, a copy of
the source, a prompt example, the wrong script, framing) gets one more attempt with the
stronger retry prompt, without draft, drafters or bias; the retry's answer is kept only
when it is clean. A streamed final is never retried: its text has gone out already.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from app.translation.backend import GenerationResult, TranslationBackend
from app.translation.options import TranslateOptions
from app.translation.pathology import FRAMING_KINDS
from app.translation.prompts import TranslationPrompt
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verdict import Verdict, diagnose_output, is_clean, merged
from app.translation.steps.verify import cleans, generate


def may_retry(req: UpdateRequest) -> bool:
    """Whether a pathological answer to ``req`` would get the retry (before its verdict):
    a final, not streamed, with a retry prompt and retries on."""
    return (req.is_final and not req.streamed and req.options.finals.final_retry
            and req.retry_prompt is not None)


def should_retry(req: UpdateRequest, verdict: Verdict) -> bool:
    """A repairable final with a pathology, a retry prompt and retries on; framing with
    cleaning off is only counted (what the caption would have shown), never acted on."""
    acted_on = verdict.pathology not in FRAMING_KINDS or cleans(req.prompt, req.options)
    return (verdict.repairable and bool(verdict.pathology) and acted_on
            and may_retry(req))


async def retry_final(backend: TranslationBackend, first: GenerationResult, pathology: str,
                      source: str, opts: TranslateOptions,
                      examples: list[tuple[str, str]] | None, retry_prompt: TranslationPrompt,
                      cancel: threading.Event | None, cap: int, forced: Sequence[int] = (),
                      ) -> tuple[GenerationResult, str | None, float]:
    """A pathological final translated once more: from scratch (no draft, no drafters),
    verified without bias, with the stronger prompt. Returns the result to keep, its
    pathology and what the retry cost.

    The retry's answer replaces the first only when it is clean, not empty and not
    cancelled, or, when the first was given up unfinished (``GenerationResult.gave_up``),
    when it is not empty and not cancelled: a whole answer rather than a cut-off copy. The
    kept result carries the decode time and forward passes of both attempts.
    The retry is a one-off generation: its prompt is not its session's, so it leaves the
    session's cached prompt for the next update.
    """
    again = await generate(backend, retry_prompt, opts, 0.0, [], 0, None, cancel, None,
                           forced=forced, one_off=True)
    verdict = diagnose_output(again, source, opts, examples, cap, retry_prompt.clean_framing)
    if is_clean(again) and (verdict is None or first.gave_up is not None):
        merged(again, first, with_drafts=True)
        return again, verdict, again.decode_ms - first.decode_ms
    merged(first, again, with_drafts=False)
    return first, pathology, again.decode_ms


async def retry_step(backend: TranslationBackend, req: UpdateRequest,
                     verdict: Verdict) -> Verdict:
    """The retry step: the verdict after a retry, or as it was when none is due."""
    if not should_retry(req, verdict):
        return verdict
    assert verdict.pathology is not None and req.retry_prompt is not None
    result, pathology, retry_ms = await retry_final(
        backend, verdict.result, verdict.pathology, req.source, req.options, req.examples,
        req.retry_prompt, req.cancel, verdict.cap, req.forced)
    return replace(verdict, result=result, pathology=pathology, retried=verdict.pathology,
                   retry_ms=retry_ms)
