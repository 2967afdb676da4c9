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

from eval.metrics.base import Metric, Score
from eval.metrics.erasure import units


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


class LAAL(Metric):
    """Mean LAAL over streams, with target words counted in ``target_unit`` (the NE unit:
    whitespace words would make a whole zh/ja sentence one word) and delays in source
    words read (``delay``; the computation-aware variant reads seconds)."""

    name = "laal"

    def __init__(self, target_unit: str = "word", delay: str = "source-words") -> None:
        self.target_unit = target_unit
        self.delay = delay

    def signature_fields(self) -> dict[str, object]:
        return {"delay": f"{self.delay}-read-when-word-stabilized",
                "target": self.target_unit, "rate": "max(hyp,ref)",
                "agg": "mean-over-streams"}

    def corpus_score(self, outputs: Sequence[Sequence[str]], reads: Sequence[Sequence[float]],
                     references: Sequence[str | None]) -> Score:
        """Per stream: its output texts, the source read at each, and its reference (None
        or empty: the output length alone sets the ideal rate). A stream's source length
        is what its final update read."""
        values = []
        for texts, read, ref in zip(outputs, reads, references, strict=True):
            value = laal([units(t, self.target_unit) for t in texts], read, read[-1],
                         len(units(ref or "", self.target_unit)) or None)
            if value is not None:
                values.append(value)
        return Score(self.name, sum(values) / len(values) if values else None,
                     self.get_signature())
