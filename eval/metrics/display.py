"""What a viewer of the displayed captions lives through: erasure, and when words appear.

Everything is computed from one stream's update records and the displays a policy made of
them (``app.translation.display``), so no model runs. Two clocks place the updates in time:

* **arrival** ``a_i``: when update i's source reached the translator. ASR streams record it
  (``t``: seconds of audio heard when the partial was produced); text sets turned into
  lag-k streams do not, and get a nominal speech rate instead: ``a_i = read_i * word_s``
  (``read_i`` source words, ``word_s`` seconds a word; 0.4 s is 150 words a minute).
* **computation-aware** ``c_i``: when update i's display appeared, with one engine that
  translates every update in order: ``c_i = max(a_i, c_{i-1}) + decode_i``. The records were
  made that way (each output is the next one's draft), so this is their own timeline; a
  server that coalesces waiting partials drops some of them and shows finals sooner, so on
  fast ASR streams and a slow machine this is an upper bound.

**Time from a source word to the first display of its translation** (``first_display_delays``):
for unit j (0-based; words, or characters for zh/ja) of the final translation, with |Y|
units in it and |X| words in the final source,

* its source word is ``s(j) = min(|X|, ceil((j + 1) * |X| / |Y|))`` (the diagonal alignment
  LAAL's ideal delays assume: no word aligner is needed, and reordering averages out over a
  sentence), and that word's time is the arrival of the first update whose source has at
  least ``s(j)`` words (when the system could first know it);
* unit j is *first displayed* at the first update whose display starts with the final's
  first j + 1 units (the unit is on screen, at its place, after a correct caption), whether
  or not a later partial takes it back again (display NE counts that);
* the delay is the display time of that update minus the source word's time, on the
  arrival clock (the policy's own cost: what it holds back) or the computation-aware one.

A final displays every unit, so each unit has a delay. A delay can be negative: the model
wrote the unit before the (proportionally) aligned source word arrived.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.prefix import common_prefix, erasures
from app.translation.display import split_units
from eval.metrics.base import Metric, Score
from eval.metrics.speed import percentile


def arrival_times(reads: Sequence[int], ts: Sequence[float | None],
                  word_s: float = 0.4) -> list[float]:
    """``a_i``: recorded times where every update has one, else ``read_i * word_s``."""
    if ts and all(t is not None for t in ts):
        return [float(t) for t in ts]  # type: ignore[arg-type]
    return [r * word_s for r in reads]


def computed_times(arrivals: Sequence[float], compute_s: Sequence[float]) -> list[float]:
    """``c_i = max(a_i, c_{i-1}) + compute_i``: one engine, every update, in order."""
    out: list[float] = []
    free = -math.inf
    for a, c in zip(arrivals, compute_s, strict=True):
        free = max(a, free) + c
        out.append(free)
    return out


def first_display_index(displays: Sequence[Sequence[str]]) -> list[int]:
    """For each unit j of the last display (the final), the first update whose display
    starts with the final's first j + 1 units."""
    final = list(displays[-1])
    first = [len(displays) - 1] * len(final)
    reached = 0  # units of the final already placed
    for i, shown in enumerate(displays):
        n = common_prefix(shown, final)
        for j in range(reached, n):
            first[j] = i
        reached = max(reached, n)
        if reached == len(final):
            break
    return first


def source_word_index(j: int, source_words: int, target_units: int) -> int:
    """``s(j)``: the (1-based) source word unit j of the final is aligned to, diagonally."""
    return max(1, min(source_words, math.ceil((j + 1) * source_words / target_units)))


def first_display_delays(displays: Sequence[Sequence[str]], reads: Sequence[int],
                         arrivals: Sequence[float], shown_at: Sequence[float]) -> list[float]:
    """Per unit of the final display: its first display time (``shown_at`` of that update)
    minus the arrival of its aligned source word (see the module docstring)."""
    final = displays[-1]
    if not final:
        return []
    x = max(1, reads[-1])
    firsts = first_display_index(displays)
    delays = []
    for j, i in enumerate(firsts):
        s = source_word_index(j, x, len(final))
        heard = next((a for r, a in zip(reads, arrivals, strict=True) if r >= s), arrivals[-1])
        delays.append(shown_at[i] - heard)
    return delays


def partial_retractions(displays: Sequence[Sequence[str]]) -> int:
    """Units taken back from one partial display to the next (the final step excluded):
    what ``stable`` promises is zero."""
    return sum(erasures(displays[:-1])) if len(displays) > 2 else 0


def final_rewrite(displays: Sequence[Sequence[str]]) -> int:
    """Units of the last partial display that the final takes back."""
    if len(displays) < 2:
        return 0
    return erasures(displays[-2:])[0]


def shown_early(displays: Sequence[Sequence[str]]) -> tuple[int, int]:
    """(units of the final first displayed by a partial, units of the final)."""
    firsts = first_display_index(displays) if displays and displays[-1] else []
    last = len(displays) - 1
    return sum(1 for i in firsts if i < last), len(firsts)


@dataclass(frozen=True)
class DisplayScore(Score):
    """``score``: mean seconds from a source word to the first display of its translation
    (arrival clock); the rest is what else a viewer lived through, over the same streams."""

    first_display_s_p50: float | None = None
    first_display_s_p90: float | None = None
    first_display_ca_s_mean: float | None = None
    first_display_ca_s_p90: float | None = None
    final_latency_ca_s_p50: float | None = None
    final_latency_ca_s_p95: float | None = None
    retracted_partial_units: int = 0
    final_rewrite_units: int = 0
    final_rewrite_rate: float = 0.0
    shown_before_final: float | None = None

    def as_row(self) -> dict[str, float | int | None]:
        """The columns ``eval.display_eval`` writes (``first_display_s_mean`` is ``score``)."""
        row = {k: v for k, v in vars(self).items() if k not in ("name", "score", "signature",
                                                                   "note")}
        return {"first_display_s_mean": self.score, **row}


def _compute_s(r: Mapping) -> float:
    """Seconds update ``r`` took: end to end against a server, else its decode time."""
    return r.get("e2e_ms", r.get("decode_ms", 0.0)) / 1000


class FirstDisplay(Metric):
    """Display latency and stability of displayed captions, counted in ``unit`` (``word``
    or ``char``), with ``word_s`` seconds per source word for streams without an audio
    clock (see the module docstring for every definition)."""

    name = "first-display"

    def __init__(self, unit: str = "word", word_s: float = 0.4) -> None:
        self.unit = unit
        self.word_s = word_s

    def signature_fields(self) -> dict[str, object]:
        return {"target": self.unit, "align": "diagonal", "source-time": "first-arrival",
                "text-clock": f"{self.word_s}s/word", "ca": "in-order-single-engine"}

    def corpus_score(self, streams: Sequence[Sequence[Mapping]],
                     displays: Sequence[Sequence[str]]) -> DisplayScore:
        """``streams``: each stream's update records (``read``, ``t``, ``decode_ms`` or
        ``e2e_ms``); ``displays``: the text shown at each of its updates."""
        ideal: list[float] = []
        ca: list[float] = []
        final_lat: list[float] = []
        retracted = rewritten = early = total = final_units = 0
        for recs, disp in zip(streams, displays, strict=True):
            reads = [r["read"] for r in recs]
            arrive = arrival_times(reads, [r.get("t") for r in recs], self.word_s)
            done = computed_times(arrive, [_compute_s(r) for r in recs])
            du = [split_units(d, self.unit) for d in disp]  # type: ignore[arg-type]
            ideal += first_display_delays(du, reads, arrive, arrive)
            ca += first_display_delays(du, reads, arrive, done)
            final_lat.append(done[-1] - arrive[-1])
            retracted += partial_retractions(du)
            rewritten += final_rewrite(du)
            e, n = shown_early(du)
            early += e
            total += n
            final_units += len(split_units(recs[-1]["text"], self.unit))  # type: ignore[arg-type]
        return DisplayScore(
            self.name, statistics.fmean(ideal) if ideal else None, self.get_signature(),
            first_display_s_p50=percentile(ideal, 50),
            first_display_s_p90=percentile(ideal, 90),
            first_display_ca_s_mean=statistics.fmean(ca) if ca else None,
            first_display_ca_s_p90=percentile(ca, 90),
            final_latency_ca_s_p50=percentile(final_lat, 50),
            final_latency_ca_s_p95=percentile(final_lat, 95),
            retracted_partial_units=retracted, final_rewrite_units=rewritten,
            final_rewrite_rate=rewritten / final_units if final_units else 0.0,
            shown_before_final=early / total if total else None)
