"""Draft statistics: tokens proposed to the verifier and accepted, by source.

One object, in the spirit of vLLM's ``SpecDecodingStats``: the engine fills it while a
sequence is verified, and everything that reports acceptance reads it (the ``usage`` and
``livetrans`` objects of a response, live caption stats, Prometheus, eval records), so no
reader re-derives the counts from differently named fields.

Sources: ``"ssbd"`` is the previous translation verified in the first forward pass of an
update; the others are the drafter names of ``drafters.chain`` (``previous``, ``ngram``,
``dictionary``, ``trigram``) proposing tokens past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SSBD = "ssbd"


@dataclass
class DraftStats:
    """Proposed / accepted token counts per draft source (mutable, merged across retries)."""

    proposed: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)

    def add(self, source: str, proposed: int, accepted: int) -> None:
        if proposed <= 0:
            return
        name = source or "unknown"
        self.proposed[name] = self.proposed.get(name, 0) + proposed
        self.accepted[name] = self.accepted.get(name, 0) + accepted

    def merge(self, other: DraftStats) -> None:
        for name, n in other.proposed.items():
            self.add(name, n, other.accepted.get(name, 0))

    @property
    def total_proposed(self) -> int:
        return sum(self.proposed.values())

    @property
    def total_accepted(self) -> int:
        return sum(self.accepted.values())

    @property
    def ssbd_proposed(self) -> int:
        return self.proposed.get(SSBD, 0)

    @property
    def ssbd_accepted(self) -> int:
        return self.accepted.get(SSBD, 0)

    def drafters(self) -> dict[str, tuple[int, int]]:
        """(proposed, accepted) of every source except the SSBD draft."""
        return {name: (n, self.accepted.get(name, 0))
                for name, n in self.proposed.items() if name != SSBD}

    def as_dict(self) -> dict[str, dict[str, int]]:
        """JSON shape: ``{"proposed": {source: n}, "accepted": {source: n}}``."""
        return {"proposed": dict(self.proposed),
                "accepted": {name: self.accepted.get(name, 0) for name in self.proposed}}
