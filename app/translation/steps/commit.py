"""The commit step: what the session keeps of an update as the next update's draft.

SSBD verifies the previous output as the next update's draft, so whatever is kept here is
carried forward: biased, a bad output would be kept for the rest of the segment. A
runaway output (the length cap, the loop detector), a loop and, for an instruction model,
framing are never a draft; with ``draft_guard`` no diagnosed output is. After the job,
``commit_session`` records it in the session with the translation (``Translator.translate``).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.translation.backend import GenerationResult
from app.translation.options import Languages
from app.translation.pathology import FRAMING_KINDS, fit_for_context
from app.translation.sessions import Session
from app.translation.steps.request import UpdateOutcome


@dataclass(frozen=True)
class NextDraft:
    """The next update's draft and, when it is empty, why (``loop``, ``copy``, ...)."""

    tokens: list[int]
    dropped: str | None


def next_draft(result: GenerationResult, pathology: str | None = None) -> list[int]:
    """What the next update of the segment may use as its draft.

    A runaway output (cut at the length cap, or ended by the loop detector) is no
    translation: biased verification would keep it and grow it by a few tokens per update
    (measured: a 4-word source that looped into "Am Sonntag, am Dienstag, am Mittwoch, ..."
    stayed a 163-token list of weekdays for the rest of the sentence at beta 0.2), and even
    unbiased, verifying it costs one logits row per token for nothing. The same holds for
    any output ``app.translation.pathology`` diagnoses (a copy of the source, a prompt
    example, the wrong script): biased, the draft would carry it to the final. It is
    dropped.
    """
    return [] if (result.runaway or pathology) else list(result.tokens)


def guard(pathology: str | None, draft_guard: bool, cleaned: bool) -> str | None:
    """The pathology that keeps an output from being a draft, if any: any one under
    ``draft_guard``; a loop whatever the guard (biased, the next update would keep
    repeating it); framing when it is cleaned (a draft carries it forward)."""
    reason = pathology if draft_guard else None
    if pathology == "loop":
        reason = "loop"
    if pathology in FRAMING_KINDS and cleaned:
        reason = pathology
    return reason


def commit_step(result: GenerationResult, tokens: list[int], pathology: str | None,
                draft_guard: bool, cleaned: bool) -> NextDraft:
    """The commit step: ``tokens`` (the caption's tokens, ``app.translation.steps.display``)
    as the next draft, or nothing and why."""
    reason = guard(pathology, draft_guard, cleaned)
    dropped = "loop" if result.runaway else reason
    return NextDraft(tokens if next_draft(result, reason) else [], dropped)


def commit_session(session: Session | None, source: str, update: UpdateOutcome, text: str,
                   final: bool, languages: Languages, seq: int | None) -> int:
    """The session's commit of an update (``Session.commit``): its draft becomes the next
    update's, its text the talk's context when it is fit for it (``fit_for_context``), and
    ``seq`` is recorded as applied with it. A cancelled update commits nothing. Returns the
    caption's revision (1 without a session)."""
    if session is None or update.result.finish_reason == "cancelled":
        return 1
    return session.commit(
        source, update.draft, final, languages.target_lang, languages.source_lang, seq=seq,
        text=text if fit_for_context(update.pathology) else None)
