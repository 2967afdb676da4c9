"""The common prefix of two sequences: one function for every place that needs it.

Token lists (KV-cache reuse, SSBD local agreement), word and character lists (display
policies, normalized erasure) all ask the same question: how many leading items two
sequences share; and how much of one output the next takes back (erasure).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def erasures(outputs: Sequence[Sequence[Any]]) -> list[int]:
    """``E(i) = |Y(i-1)| - |LCP(Y(i-1), Y(i))|`` for each step of a stream of outputs: the
    items deleted from the end of one output to reach the next (SSBD formula 4). Pure
    arithmetic on already-split outputs, so the eval metric and the caption client share it
    without either depending on the other."""
    return [len(prev) - common_prefix(prev, cur)
            for prev, cur in zip(outputs, outputs[1:], strict=False)]


def normalized_erasure(streams: Iterable[Sequence[Sequence[Any]]]) -> float:
    """Corpus NE: erasures summed over every stream, over the summed final lengths
    (0.0 when nothing was output)."""
    erased = final = 0
    for outputs in streams:
        erased += sum(erasures(outputs))
        final += len(outputs[-1]) if outputs else 0
    return erased / final if final else 0.0
