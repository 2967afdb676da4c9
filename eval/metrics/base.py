"""The shape every metric here shares (after sacrebleu's ``metrics/base.py``).

A metric is an object built with the arguments that change its numbers (unit, tokenizer,
language, display k, ...). It scores a whole corpus at once (``corpus_score``) and derives
its signature from those same arguments, so a signature can never describe settings other
than the ones that produced the score, and it is known before anything is scored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Signature:
    """``name|key:value|...``: what a reader needs to reproduce a number."""

    name: str
    fields: tuple[tuple[str, object], ...]

    def __str__(self) -> str:
        return "|".join([self.name, *(f"{k}:{v}" for k, v in self.fields)])


@dataclass(frozen=True)
class Score:
    """One corpus-level number and the signature of the metric that produced it.
    ``score`` is None when the metric could not be computed (``note`` says why)."""

    name: str
    score: float | None
    signature: Signature
    note: str = ""

    def __str__(self) -> str:
        value = "-" if self.score is None else f"{self.score:.4g}"
        return f"{self.name} = {value}"


class Metric(ABC):
    """A corpus metric; subclasses add ``corpus_score`` with the inputs they need."""

    name: ClassVar[str]

    @abstractmethod
    def signature_fields(self) -> dict[str, object]:
        """The settings that change this metric's numbers, in signature order."""

    def get_signature(self) -> Signature:
        return Signature(self.name, tuple(self.signature_fields().items()))

    @property
    def signature(self) -> str:
        return str(self.get_signature())
