"""Re-alignment on the session's previous translation.

SSBD verifies the previous translation as one draft; at the first disagreement the rest of
it is dropped. Often the model only rephrased a word or two and then continues exactly as
before ("Am Montag haben Forscher" -> "Am Montag gaben Forscher ..."). This drafter finds
where the new output has re-joined the old one (the last n tokens of history inside the
previous translation) and proposes the old continuation from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from drafters.base import DraftContext
from drafters.matching import follow_match


@dataclass
class PreviousOutputDrafter:
    name: str = "previous"
    max_n: int = 4
    min_n: int = 1

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        previous = list(ctx.previous)
        if not previous:
            return []
        if not ctx.history:
            return previous[:k]
        return follow_match(list(ctx.history), previous, k, self.max_n, self.min_n)
