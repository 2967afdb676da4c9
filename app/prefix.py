"""The common prefix of two sequences: one function for every place that needs it.

Token lists (KV-cache reuse, SSBD local agreement), word and character lists (display
policies, normalized erasure) all ask the same question: how many leading items two
sequences share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
