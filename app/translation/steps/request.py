"""What one update's job is given and what it gives back.

``run_update`` took fifteen arguments; the steps pass one ``UpdateRequest`` instead, so
that each step reads the few fields it needs by name and a test builds a request with only
those. ``UpdateOutcome`` is the job's answer, which ``Translator.translate`` and the eval
harness read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.translation.backend import GenerationResult
from app.translation.glossary import Term
from app.translation.options import TranslateOptions
from app.translation.prompts import TranslationPrompt


@dataclass(frozen=True)
class UpdateRequest:
    """One update as a job sees it (``run_update``'s arguments, named).

    ``draft_tokens`` is the session's draft; ``draft_text`` a client's ``prediction``
    (tokenized in the job) when there are no draft tokens; ``extra_draft`` is for
    benchmarks only (e.g. the old stop token). ``examples`` are the prompt's example pairs
    (for the leakage detector); ``retry_prompt`` the stronger prompt of a final's retry;
    ``terms`` the glossary entries that apply and ``term_prompt`` the prompt with missing
    terms written into the source. ``forced`` (append-only text) are the segment's
    committed tokens, which every attempt's answer starts with.
    """

    prompt: TranslationPrompt
    options: TranslateOptions
    is_final: bool
    draft_tokens: list[int] | None = None
    draft_text: str | None = None
    chain: object | None = None
    cancel: threading.Event | None = None
    on_text: Callable[[str], None] | None = None
    extra_draft: list[int] | None = None
    draft_agreed: int | None = None
    examples: list[tuple[str, str]] | None = None
    retry_prompt: TranslationPrompt | None = None
    terms: list[Term] = field(default_factory=list)
    term_prompt: Callable[[list[str]], TranslationPrompt] | None = None
    forced: Sequence[int] = ()

    @property
    def source(self) -> str:
        return self.prompt.source

    @property
    def streamed(self) -> bool:
        """A streamed update's text has gone out already: it is neither retried nor cut."""
        return self.on_text is not None


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
