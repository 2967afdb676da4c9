"""Update streams: what a live-translation system sees over time for one sentence.

Text sets become lag-k word-prefix streams (the source revealed k words at a time, the
last update the full sentence: "FLORES lag-3"); ASR partial files already are streams.
Both come out in one shape, ``Stream`` of ``Update``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Update:
    source: str
    is_final: bool
    t: float | None = None  # seconds from the stream's start, when recorded


@dataclass
class Stream:
    id: str
    updates: list[Update]
    reference: str | None = None
    # the talk a sentence belongs to (ACL 60/60 ``talk_ids.txt``): with ``context``, a
    # talk's streams are one session, its earlier finals the context of the later ones
    talk: str | None = None


def lag_k_stream(sentence: str, k: int = 3) -> list[Update]:
    """Prefixes of k, 2k, 3k... words; the last update is the whole sentence, final."""
    if k < 1:
        raise ValueError("k must be >= 1")
    words = sentence.split()
    if not words:
        return []
    cuts = list(range(k, len(words), k)) + [len(words)]
    return [Update(" ".join(words[:c]), is_final=(c == len(words))) for c in cuts]
