"""Suffix matching over token lists, shared by the prompt n-gram and previous-output drafters.

Find the most recent occurrence of the last ``n`` tokens of the history (longest ``n``
first) in a source sequence, and return what followed it. Sequences here are a few
hundred tokens, so a plain backward scan costs microseconds and needs no index.
"""

from __future__ import annotations

from collections.abc import Sequence


def follow_match(
    history: Sequence[int], source: Sequence[int], k: int, max_n: int = 4, min_n: int = 1
) -> list[int]:
    """Up to ``k`` tokens that followed the latest match of history's longest suffix."""
    if k <= 0 or not history or not source:
        return []
    for n in range(min(max_n, len(history)), min_n - 1, -1):
        pattern = list(history[-n:])
        first = pattern[0]
        for start in range(len(source) - n - 1, -1, -1):
            if source[start] == first and list(source[start:start + n]) == pattern:
                return list(source[start + n:start + n + k])
    return []
