"""The cut step: a final that is still no translation after its retry, cut to what is.

A final that still loops keeps the text before the repetition, with one copy of the
repeated span; a final that is still framed (an instruction model's note or label that
cleaning could not take off) ends where the framing starts. Only the text changes: the
tokens, usage and draft counts stay what the engine decoded (a final's tokens are no
draft: its segment is over).
"""

from __future__ import annotations

from dataclasses import replace

from app.translation.backend import GenerationResult
from app.translation.framing import cut_framing
from app.translation.pathology import FRAMING_KINDS, loop_cut
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verdict import Verdict, ran_away
from app.translation.steps.verify import cleans


def cut_loop(result: GenerationResult, runaway: bool) -> tuple[GenerationResult, bool]:
    """A looping final's text cut where the loop starts (``pathology.loop_cut``): the
    text before the repetition, with one copy of the repeated span. Returns the result
    and whether it was cut.

    An output that ran into the length cap without a repetition to cut at is left as it is.
    """
    end = loop_cut(result.text, runaway=runaway)
    if end is None:
        return result, False
    return replace(result, text=result.text[:end]), True


def cut_step(req: UpdateRequest, verdict: Verdict) -> Verdict:
    """The cut step: a repairable looping final cut where its loop starts (when retries
    are on), then any final still framed cut where its framing starts (when cleaning is
    on)."""
    opts = req.options
    if verdict.repairable and verdict.pathology == "loop" and opts.finals.final_retry:
        result, cut = cut_loop(verdict.result, ran_away(verdict.result, opts, verdict.cap))
        verdict = replace(verdict, result=result, cut=cut)
    if req.is_final and verdict.pathology in FRAMING_KINDS and cleans(req.prompt, opts):
        result = replace(verdict.result, text=cut_framing(verdict.result.text, req.source))
        verdict = replace(verdict, result=result, cut=True)
    return verdict
