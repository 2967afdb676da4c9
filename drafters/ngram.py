"""Prompt n-gram lookup (prompt lookup decoding).

Translations copy from their prompt more than one might think: names, numbers, acronyms and
technical terms of the source ("Stanford University School of Medicine") reappear verbatim,
and so do phrases of the few-shot examples. The drafter matches the last n tokens of the
answer against the prompt and the answer so far and proposes what followed.
"""

from __future__ import annotations

from dataclasses import dataclass

from drafters.base import DraftContext
from drafters.matching import follow_match


@dataclass
class PromptNgramDrafter:
    name: str = "ngram"
    max_n: int = 4
    min_n: int = 2

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        history = list(ctx.history)
        # the answer so far first (most recent wins), then the prompt
        own = follow_match(history, history[:-1], k, self.max_n, self.min_n)
        if own:
            return own
        return follow_match(history, list(ctx.prompt), k, self.max_n, self.min_n)
