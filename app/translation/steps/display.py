"""The display step: the caption an update shows, and what of it a viewer sees.

Two things stand between an output and a viewer. An instruction model's partial may still
grow into framing ("Here", "Hier ist die"), so its caption holds back a tail that may
become framing and is cut where framing starts (a final was cut by the cut step already);
and display-only mask-k hides the last ``mask_k`` tokens of a partial from the viewer
while the draft keeps them. The tokens the caption stands for are kept too: they are the
next update's draft (``app.translation.steps.commit``) and what a token-counting display
policy counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.translation.backend import GenerationResult, TranslationBackend
from app.translation.framing import cut_framing, held_back
from app.translation.steps.request import UpdateRequest
from app.translation.steps.verify import cleans


@dataclass(frozen=True)
class Caption:
    """What the display step made of an output: ``tokens`` stand for the (cleaned) answer
    and become the next draft; ``text`` and ``text_tokens`` are the caption (held back on a
    partial); ``display`` is what the viewer sees of it (mask-k applied)."""

    tokens: list[int]
    text: str
    text_tokens: list[int]
    display: str


def masked_tokens(tokens: list[int], mask_k: int, is_final: bool) -> list[int]:
    """Tokens the viewer sees: all of a final, all but the last ``mask_k`` otherwise."""
    if is_final or mask_k <= 0:
        return tokens
    return tokens[: max(0, len(tokens) - mask_k)]


def shown_tokens(backend: TranslationBackend, result: GenerationResult) -> list[int]:
    """The tokens of what the caption shows: the decoded tokens, or, where cleaning took
    framing off, the cleaned text's own tokens (the next draft is the cleaned translation,
    never a label or a quote the model wrapped round it)."""
    if backend.detokenize(result.tokens).strip() == result.text.strip():
        return list(result.tokens)
    return backend.tokenize(result.text.strip(), add_bos=False) if result.text.strip() else []


def caption_step(backend: TranslationBackend, req: UpdateRequest,
                 result: GenerationResult) -> Caption:
    """The display step: the caption of ``result`` and the viewer's part of it."""
    cleaned = cleans(req.prompt, req.options)
    tokens = shown_tokens(backend, result) if cleaned else list(result.tokens)
    caption, caption_tokens = result.text.strip(), tokens
    if cleaned and not req.is_final:  # no "Here is" flickers in: held back until it cannot be
        caption = held_back(cut_framing(caption, req.source), req.source,
                            req.options.languages.target_lang)
        if caption != result.text.strip():
            caption_tokens = backend.tokenize(caption, add_bos=False) if caption else []
    shown = masked_tokens(caption_tokens, req.options.display.mask_k, req.is_final)
    display = caption if len(shown) == len(caption_tokens) else backend.detokenize(shown)
    return Caption(tokens, caption, caption_tokens, display.strip())
