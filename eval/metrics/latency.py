"""Latency of re-translation streams: LAAL (length-adaptive average lagging).

Re-translation revises its output, so a target word only counts as *emitted* once it is
final: the delay of the final output's word j is the source length (in words) read at the
first update from which the first j words of every later output equal the final's first j
words (the word appeared and stayed). With those delays d_j, LAAL (Papi et al., 2022) is

    LAAL = 1/tau * sum_{j=1..tau} [ d_j - (j - 1) * |X| / max(|Y|, |Y*|) ]

where |X| is the source length, |Y| the output length, |Y*| the reference length and tau the
first j whose delay reaches the full source (every word after it was written with the
whole sentence in view). The computation-aware variant replaces source words by seconds:
d_j is the wall-clock time (since the stream started) at which the update that stabilised
word j finished translating, and the ideal rate uses the source's duration.
"""

from __future__ import annotations

from collections.abc import Sequence


def stable_since(outputs: Sequence[Sequence[str]]) -> list[int]:
    """For each word j of the final output, the index of the update from which the
    first j+1 words never changed again."""
    final = outputs[-1]
    result = []
    for j in range(len(final)):
        first = len(outputs) - 1
        for i in range(len(outputs) - 1, -1, -1):
            if list(outputs[i][: j + 1]) == list(final[: j + 1]):
                first = i
            else:
                break
        result.append(first)
    return result


def laal(outputs: Sequence[Sequence[str]], read: Sequence[float], source_len: float,
         reference_len: int | None = None) -> float | None:
    """LAAL of one stream. ``outputs[i]`` is the word list after update i, ``read[i]`` how
    much source (words, or seconds for the computation-aware variant) had been consumed
    when update i's output was available."""
    if not outputs or not outputs[-1]:
        return None
    delays = [read[i] for i in stable_since(outputs)]
    y = len(outputs[-1])
    rate = source_len / max(y, reference_len or 0)
    total = 0.0
    tau = 0
    for j, d in enumerate(delays):
        total += d - j * rate
        tau += 1
        if d >= source_len:
            break
    return total / tau


def mean_laal(values: Sequence[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def laal_signature(unit: str = "source-words", target_unit: str = "word") -> str:
    return (f"laal|delay:{unit}-read-when-word-stabilized|target:{target_unit}"
            "|rate:max(hyp,ref)|agg:mean-over-streams")
