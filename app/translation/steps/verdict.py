"""The verdict: what is wrong with an output, and the state the final policy acts on.

The retry, cut and repair steps each look at the same few facts (the output, its
pathology, whether it ran away, whether it may still change) and may replace them; the
``Verdict`` carries those facts from step to step, so each step is a function from one
verdict to the next and can be tested on a verdict built by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.translation.backend import GenerationResult
from app.translation.options import TranslateOptions
from app.translation.pathology import diagnose, loops


@dataclass(frozen=True)
class Verdict:
    """An update's output so far and what the final policy made of it.

    ``repairable``: a final whose first attempt was neither streamed nor cancelled (only
    such a final is retried, cut for a loop, or repaired). ``retried``: the first attempt's
    pathology when it was translated again (or ``glossary_miss``); ``retry_ms`` what the
    further attempts cost; ``cut`` whether the text was cut; ``missing`` the glossary
    source terms whose target terms are not in the text.
    """

    result: GenerationResult
    pathology: str | None
    cap: int
    repairable: bool
    retried: str | None = None
    retry_ms: float = 0.0
    cut: bool = False
    missing: list[str] = field(default_factory=list)


def ran_away(result: GenerationResult, opts: TranslateOptions, cap: int) -> bool:
    """The output was cut off rather than finished: the engine's loop detector ended it, or
    it reached the server's length cap ``cap`` (``translation_token_cap``). A client's own
    ``max_tokens`` below that cap truncates a translation where the client asked: that is
    no loop, and retrying it would only cost a second translation cut at the same length."""
    return result.looped or (result.finish_reason == "length"
                             and opts.limits.max_tokens >= cap)


def diagnose_output(result: GenerationResult, source: str, opts: TranslateOptions,
                    examples: list[tuple[str, str]] | None, cap: int,
                    framing: bool = False) -> str | None:
    """``app.translation.pathology.diagnose`` for a translation of ``source`` whose length
    cap was ``cap`` (only ``loop`` when the pair is one language: a copy is then no error);
    ``framing``: an instruction model's answer, checked for framing too."""
    runaway = ran_away(result, opts, cap)
    langs = opts.languages
    if langs.source_lang == langs.target_lang:
        return "loop" if runaway or loops(result.text) else None
    return diagnose(result.text, source, langs.target_lang, examples=examples or (),
                    runaway=runaway, framing=framing)


def is_clean(result: GenerationResult) -> bool:
    """A further attempt may replace the first only when it is not empty and was not
    cancelled (its pathology is checked by the caller)."""
    return bool(result.text.strip()) and result.finish_reason != "cancelled"


def merged(kept: GenerationResult, other: GenerationResult, with_drafts: bool) -> None:
    """``kept`` carries the decode time and forward passes of both attempts (and, when it
    is the later attempt, the first attempt's draft statistics too)."""
    kept.decode_ms += other.decode_ms
    kept.forward_passes += other.forward_passes
    if with_drafts:
        kept.drafts.merge(other.drafts)
