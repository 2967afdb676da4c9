"""Drafters in order: the first one with a proposal wins, cut at a (possibly adaptive) budget.

Verification cost on a CPU is asymmetric: one decode step costs ~36-41 ms for Gemma 270M,
one extra logits row in the same pass ~2.6 ms (see ``livetrans bench``). A rejected draft
token is cheap, an accepted one saves a whole step, so budgets can be generous; the
adaptive budget still shrinks after rejections so chronic misses don't add up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from drafters.base import DraftContext, Drafter

# Most precise first: measured live on FLORES dev (Gemma 270M, 2 CPU cores) the prompt n-gram
# drafter's proposals were accepted 53-78% of the time, the dictionary's 12-16%, the
# trigram's 1-12% (see ``livetrans drafter-bench``); the first non-empty proposal wins.
DEFAULT_ORDER = ("previous", "ngram", "dictionary", "trigram")


@dataclass(frozen=True)
class Proposal:
    tokens: list[int]
    source: str  # the drafter's name, for per-drafter statistics


@dataclass
class DrafterChain:
    drafters: Sequence[Drafter]
    budget: int = 6
    adaptive: bool = True
    min_budget: int = 2
    max_budget: int = 12
    _current: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._current = float(self.budget)

    @property
    def current_budget(self) -> int:
        return int(round(self._current)) if self.adaptive else self.budget

    def propose_from(self, ctx: DraftContext, k: int) -> Proposal:
        """The first non-empty proposal, at most ``min(k, budget)`` tokens."""
        limit = min(k, self.current_budget)
        if limit <= 0:
            return Proposal([], "")
        for drafter in self.drafters:
            tokens = drafter.propose(ctx, limit)
            if tokens:
                return Proposal(list(tokens[:limit]), drafter.name)
        return Proposal([], "")

    def record(self, proposed: int, accepted: int) -> None:
        """Grow the budget after full acceptance, shrink it after an early miss."""
        if not self.adaptive or proposed == 0:
            return
        if accepted == proposed:
            self._current = min(self.max_budget, self._current + 1)
        else:
            self._current = max(self.min_budget, 0.5 * self._current + 0.5 * (accepted + 1))


def build_chain(names: Sequence[str], available: Mapping[str, Drafter],
                budget: int = 6) -> DrafterChain | None:
    """A chain of the named drafters that are available; unknown names are an error."""
    unknown = [n for n in names if n not in DEFAULT_ORDER]
    if unknown:
        raise ValueError(f"unknown drafters: {', '.join(unknown)}")
    parts = [available[n] for n in names if n in available]
    return DrafterChain(parts, budget=budget) if parts else None
