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

    def summary(self, output_tokens: int) -> dict[str, int | dict[str, dict[str, int]]]:
        """The flat draft counts every report carries (the ``livetrans`` object, a live
        caption's ``stats``, eval records), for an output of ``output_tokens`` tokens:
        ``draft_tokens``, ``accepted_tokens``, ``new_tokens`` (output not accepted from a
        draft), ``ssbd_draft_tokens``, ``ssbd_accepted_tokens`` and ``drafts``
        (``as_dict``)."""
        return {"draft_tokens": self.total_proposed, "accepted_tokens": self.total_accepted,
                "new_tokens": output_tokens - self.total_accepted,
                "ssbd_draft_tokens": self.ssbd_proposed,
                "ssbd_accepted_tokens": self.ssbd_accepted, "drafts": self.as_dict()}

    @classmethod
    def from_dict(cls, data: dict | None) -> DraftStats:
        """The inverse of ``as_dict`` (a record written before it existed counts nothing)."""
        stats = cls()
        accepted = (data or {}).get("accepted", {})
        for name, n in (data or {}).get("proposed", {}).items():
            stats.add(name, n, accepted.get(name, 0))
        return stats

    def as_dict(self) -> dict[str, dict[str, int]]:
        """JSON shape: ``{"proposed": {source: n}, "accepted": {source: n}}``."""
        return {"proposed": dict(self.proposed),
                "accepted": {name: self.accepted.get(name, 0) for name in self.proposed}}


def acceptance(proposed: int, accepted: int, output_tokens: int) -> dict[str, float | None]:
    """The acceptance rates: ``A/D`` = accepted / proposed (drafted) tokens, ``A/O`` =
    accepted / output tokens (None where the denominator is 0)."""
    return {"A/D": accepted / proposed if proposed else None,
            "A/O": accepted / output_tokens if output_tokens else None}
