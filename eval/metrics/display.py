"""What a viewer of the displayed captions lives through: erasure, and when words appear.

Everything is computed from one stream's update records and the displays a policy made of
them (``app.display``), so no model runs. Two clocks place the updates in time:

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
from collections.abc import Sequence

from eval.metrics.erasure import erasures, lcp_len


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
        n = lcp_len(shown, final)
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


def display_signature(unit: str, word_s: float) -> str:
    return (f"first-display|target:{unit}|align:diagonal|source-time:first-arrival"
            f"|text-clock:{word_s}s/word|ca:in-order-single-engine")
