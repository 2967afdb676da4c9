"""The draft step: what the generation verifies before it decodes on its own.

SSBD's speed and calm come from the draft (the segment's previous output, or a client's
``prediction``), and most of what can go wrong with it is decided here, before the model
runs: a prediction is tokenized as the prompt's answers begin; under append-only text only
the part past the committed (forced) prefix is a draft; ``mask_mode="draft"`` cuts the
masked tail; sentence-final punctuation ending the draft is no evidence that the
translation ends there, so it is verified without bias (the bias limit); ``bias_scope=
"agreed"`` biases only what two outputs agreed on; and a glossary's target terms join the
drafter chain, so that a term the model begins is written as the glossary spells it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.engine.timings import timed
from app.translation.backend import TranslationBackend
from app.translation.steps.request import UpdateRequest
from drafters.chain import DrafterChain
from drafters.glossary import GlossaryContinuation

# The bias a glossary term is verified with once the model has begun it: at 0.5 or more
# the term's own next token always wins (``app.engine.verify``), so a begun term is written
# as the glossary spells it.
GLOSSARY_BETA = 0.5

TERMINAL_PUNCT = frozenset(".!?。！？…")


@dataclass(frozen=True)
class Draft:
    """What the verify step is handed: the draft, how much of it is biased, and the
    drafter chain (with the glossary's drafter and its beta when terms apply)."""

    tokens: list[int]
    bias_limit: int
    chain: object | None
    drafter_beta: dict[str, float] | None = None


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


def continuation(draft: list[int], agreed: int | None,
                 forced: Sequence[int]) -> tuple[list[int], int | None]:
    """The draft of what follows ``forced``: the previous output past the forced prefix
    (its agreed part shortened alike), or nothing when that output did not start with it."""
    if not forced:
        return draft, agreed
    if draft[: len(forced)] != list(forced):
        return [], 0
    return draft[len(forced):], None if agreed is None else max(0, agreed - len(forced))


def no_bos(backend: TranslationBackend) -> Callable[[str], list[int]]:
    """The backend's tokenizer for text inside an answer (no BOS)."""
    return lambda text: backend.tokenize(text, add_bos=False)


def with_glossary(chain: object | None, drafters: list[object], budget: int) -> DrafterChain:
    """The request's drafter chain with the glossary drafters first (a term, once begun,
    outranks every other proposal)."""
    base = list(getattr(chain, "drafters", []) or [])
    return DrafterChain([*drafters, *base], budget=getattr(chain, "budget", budget))


def draft_tokens(backend: TranslationBackend, req: UpdateRequest) -> list[int]:
    """The draft before it is shaped: the session's tokens, or the client's prediction
    tokenized (few-shot answers start with " Der", not "Der")."""
    if req.draft_tokens is not None:
        return list(req.draft_tokens)
    text = req.draft_text
    if not text:
        return []
    if req.prompt.stop_at_newline and not text.startswith(" "):
        text = " " + text
    with timed("tokenize_ms"):
        return backend.tokenize(text, add_bos=False)


def prepare_draft(backend: TranslationBackend, req: UpdateRequest) -> Draft:
    """The draft step: the request's draft past its forced prefix, masked, with its bias
    limit, and the chain with the glossary's drafter where terms apply."""
    drafting, display = req.options.drafting, req.options.display
    draft, agreed = continuation(draft_tokens(backend, req), req.draft_agreed, req.forced)
    if display.mask_mode == "draft" and display.mask_k > 0:
        draft = draft[: max(0, len(draft) - display.mask_k)]
    # The draft's end is no evidence that the translation ends there: sentence-final
    # punctuation at the very end of the draft is verified without bias.
    tail = trailing_punctuation(backend, draft) if drafting.unbiased_tail else 0
    bias_limit = len(draft) - tail
    if drafting.bias_scope == "agreed":
        bias_limit = min(bias_limit, agreed or 0)
    if req.extra_draft:
        draft = draft + list(req.extra_draft)  # benchmarks only: e.g. the old stop token
        bias_limit = len(draft) if not drafting.unbiased_tail else bias_limit
    chain, drafter_beta = req.chain, None
    if req.terms and "draft" in req.options.talk.glossary_steps:
        chain = with_glossary(chain, [GlossaryContinuation(
            [t.target for t in req.terms], no_bos(backend), backend.detokenize)],
            drafting.draft_budget)
        drafter_beta = {GlossaryContinuation.name: GLOSSARY_BETA}
    return Draft(draft, bias_limit, chain, drafter_beta)
