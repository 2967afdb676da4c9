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


def final_caption_ms(streams: Iterable[list[Mapping]]) -> dict[str, float | None]:
    """Time from a final source's arrival to its final translation, p50 and p95.

    In process that is the final update's decode time (nothing queues); against a server
    (``--server``) it is the request's end-to-end time, queueing and HTTP included.
    """
    ms = [recs[-1].get("e2e_ms", recs[-1]["decode_ms"]) for recs in streams if recs]
    return {"final_ms_p50": percentile(ms, 50), "final_ms_p95": percentile(ms, 95)}


def speedup(method_decode_s: float, ar_decode_s: float) -> float | None:
    """Ratio of total decode time of the AR baseline to the method's, on the same updates."""
    return ar_decode_s / method_decode_s if method_decode_s else None


def percentile(values: list[float], q: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
