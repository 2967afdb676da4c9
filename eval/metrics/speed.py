"""Speed over one update stream: total decode time, output tokens/s, speedup over ``ar``."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping


def speed(records: Iterable[Mapping]) -> dict[str, float]:
    ms = tokens = prompt_ms = 0.0
    for r in records:
        ms += r["decode_ms"]
        prompt_ms += r.get("prompt_ms", 0.0)
        tokens += r["tokens"]
    return {"decode_s": ms / 1000, "prompt_s": prompt_ms / 1000,
            "tokens_per_s": tokens / ms * 1000 if ms else 0.0}


def speedup(method_decode_s: float, ar_decode_s: float) -> float | None:
    """Ratio of total decode time of the AR baseline to the method's, on the same updates."""
    return ar_decode_s / method_decode_s if method_decode_s else None


def percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
