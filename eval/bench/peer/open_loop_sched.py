"""The pure parts of ``llama-server-bench --live --open-loop`` (``eval.bench.peer.open_loop``): when
each speaker says what, what a caption client sends, and what is made of the latencies.

* ``schedule``: a speaker reveals its sentence ``lag`` words at a time, one update every
  ``period`` seconds (lag 3 every 1.2 s: 150 words a minute), and its final at the
  sentence end (the last words at the same pace); the next sentence follows at once.
  Speakers start staggered (``period / speakers`` apart by default), so their updates do
  not all land in the same instant.
* ``Pending``: the client policy, the same for every server: a client never has two
  requests in flight; an update that comes while one is out waits, and a newer one
  replaces every waiting partial (counted as skipped): the newest partial is sent when the
  answer arrives. A final is never skipped.
* ``speak``: one speaker's loop on a clock that tests can replace.
* ``percentile`` and ``capacity``: p50/p90/p99, and the most speakers within the bounds.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Spoken:
    """One update as a speaker says it: ``t`` seconds after the run began."""

    t: float
    stream: int  # the sentence's place in the run (its session)
    index: int  # the update's place in its sentence
    source: str
    final: bool


def sentence_times(words: int, lag: int, period: float) -> list[float]:
    """Seconds from the sentence's start at which each update is said: ``lag`` words every
    ``period`` s, the final when the last word is said (``words * period / lag``)."""
    if words <= 0:
        return []
    per_word = period / lag
    cuts = list(range(lag, words, lag)) + [words]
    return [c * per_word for c in cuts]


def schedule(sentences: Sequence[tuple[int, Sequence[tuple[str, bool]]]], lag: int,
             period: float, start: float = 0.0) -> list[Spoken]:
    """One speaker's updates, sentence after sentence from ``start``: ``sentences`` are
    (stream id, its updates as (source, final)), the updates lag-k prefixes."""
    out: list[Spoken] = []
    t0 = start
    for stream, updates in sentences:
        if not updates:
            continue
        words = len(updates[-1][0].split())
        times = sentence_times(words, lag, period)
        if len(times) != len(updates):  # not lag-k prefixes: spread them evenly instead
            times = [(j + 1) * words * period / lag / len(updates)
                     for j in range(len(updates))]
        for j, ((source, final), t) in enumerate(zip(updates, times, strict=True)):
            out.append(Spoken(t0 + t, stream, j, source, final))
        t0 += times[-1]
    return out


def staggered_starts(speakers: int, period: float, stagger: float | None = None) -> list[float]:
    step = period / speakers if stagger is None else stagger
    return [k * step for k in range(speakers)]


@dataclass
class Pending:
    """What a client holds back while a request is in flight (see the module's doc)."""

    waiting: list[Spoken] = field(default_factory=list)
    skipped: int = 0

    def arrive(self, update: Spoken) -> None:
        kept = [u for u in self.waiting if u.final]
        self.skipped += len(self.waiting) - len(kept)
        self.waiting = [*kept, update]

    def take(self) -> Spoken | None:
        return self.waiting.pop(0) if self.waiting else None

    def __bool__(self) -> bool:
        return bool(self.waiting)


@dataclass
class Caption:
    """An answered update: when it was said and when its caption arrived (run seconds)."""

    update: Spoken
    arrived: float
    ok: bool = True

    @property
    def latency(self) -> float:
        return self.arrived - self.update.t


async def speak(script: Sequence[Spoken], send: Callable[[Spoken], Awaitable[bool]],
                clock: Callable[[], float], sleep: Callable[[float], Awaitable[object]],
                ) -> tuple[list[Caption], int]:
    """One speaker's client: each update handed to the policy when it is said, the next
    waiting one sent when the last answer arrived; ``send`` answers whether it succeeded.
    Returns the captions (failed ones with ``ok`` False) and the partials skipped."""
    pending = Pending()
    captions: list[Caption] = []
    i = 0
    while i < len(script) or pending:
        now = clock()
        while i < len(script) and script[i].t <= now:
            pending.arrive(script[i])
            i += 1
        update = pending.take()
        if update is None:
            await sleep(script[i].t - now)
            continue
        ok = await send(update)
        captions.append(Caption(update, clock(), ok))
    return captions, pending.skipped


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), linear between the closest ranks; None if empty."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def latency_figures(captions: Sequence[Caption]) -> dict:
    """p50/p90/p99 of update -> caption (partials) and final -> final caption, in s."""
    out: dict = {}
    for kind, final in (("partial", False), ("final", True)):
        values = [c.latency for c in captions if c.ok and c.update.final == final]
        out[f"{kind}_n"] = len(values)
        for q in (50, 90, 99):
            v = percentile(values, q)
            out[f"{kind}_p{q}"] = None if v is None else round(v, 3)
    return out


def within(figures: dict, partial_bound: float, final_bound: float) -> bool:
    p, f = figures.get("partial_p90"), figures.get("final_p90")
    return p is not None and f is not None and p <= partial_bound and f <= final_bound \
        and not figures.get("errors")


def capacity(by_speakers: dict[int, dict], partial_bound: float = 1.0,
             final_bound: float = 2.0) -> int:
    """The most speakers within the bounds at p90, every smaller count measured within
    them too (a count that passes above one that failed is noise, not capacity); 0 when
    even the fewest fail."""
    best = 0
    for speakers in sorted(by_speakers):
        if not within(by_speakers[speakers], partial_bound, final_bound):
            break
        best = speakers
    return best
