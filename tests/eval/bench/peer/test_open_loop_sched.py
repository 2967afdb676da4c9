"""The open loop's pure parts (``eval.bench.peer.open_loop_sched``): the schedule, the
client policy, the percentiles and the capacity, on a clock of their own (no server, no real
time)."""

from __future__ import annotations

import asyncio

import pytest

from eval.bench.peer.open_loop_sched import (
    Caption,
    Pending,
    Spoken,
    capacity,
    latency_figures,
    percentile,
    schedule,
    sentence_times,
    speak,
    staggered_starts,
)
from eval.datasets.streams import lag_k_stream


def _updates(sentence: str) -> list[tuple[str, bool]]:
    return [(u.source, u.is_final) for u in lag_k_stream(sentence, 3)]


def test_a_lag_3_update_every_period_and_the_final_at_the_sentence_end() -> None:
    # 7 words: updates at 3 and 6 words, the final at the 7th word (0.4 s a word)
    assert sentence_times(7, 3, 1.2) == pytest.approx([1.2, 2.4, 2.8])
    assert sentence_times(6, 3, 1.2) == pytest.approx([1.2, 2.4])
    assert sentence_times(0, 3, 1.2) == []


def test_sentences_follow_each_other_from_the_speakers_start() -> None:
    script = schedule([(0, _updates("one two three four five six seven")),
                       (5, _updates("a b c d"))], 3, 1.2, start=0.3)
    assert [round(s.t, 3) for s in script] == [1.5, 2.7, 3.1, 4.3, 4.7]
    assert [(s.stream, s.index, s.final) for s in script] == [
        (0, 0, False), (0, 1, False), (0, 2, True), (5, 0, False), (5, 1, True)]
    assert script[-1].source == "a b c d"


def test_starts_are_staggered_over_one_period_by_default() -> None:
    assert staggered_starts(4, 1.2) == pytest.approx([0.0, 0.3, 0.6, 0.9])
    assert staggered_starts(2, 1.2, stagger=0.1) == pytest.approx([0.0, 0.1])
    assert staggered_starts(1, 1.2) == [0.0]


def _spoken(t: float, index: int, final: bool = False, stream: int = 0) -> Spoken:
    return Spoken(t, stream, index, f"u{index}", final)


def test_a_newer_update_replaces_waiting_partials_but_never_a_final() -> None:
    p = Pending()
    p.arrive(_spoken(1, 0))
    p.arrive(_spoken(2, 1))  # the first partial is skipped
    assert p.skipped == 1 and [u.index for u in p.waiting] == [1]
    p.arrive(_spoken(3, 2, final=True))  # the final replaces the partial...
    p.arrive(_spoken(4, 0, stream=1))  # ...but is itself kept
    p.arrive(_spoken(5, 1, stream=1))
    assert p.skipped == 3
    assert [(u.stream, u.index) for u in p.waiting] == [(0, 2), (1, 1)]
    assert p.take().final and p.take().stream == 1 and p.take() is None and not p


class FakeClock:
    """Virtual seconds: sleeping and serving a request move the clock, nothing waits."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


def _run(script: list[Spoken], service_s: float, fail: set[int] = frozenset()):  # noqa: ANN202
    clock = FakeClock()
    sent: list[Spoken] = []

    async def send(u: Spoken) -> bool:
        sent.append(u)
        clock.t += service_s
        return u.index not in fail

    captions, skipped = asyncio.run(speak(script, send, clock.now, clock.sleep))
    return captions, skipped, sent


def test_a_fast_server_answers_every_update_as_it_is_said() -> None:
    script = schedule([(0, _updates("one two three four five six seven"))], 3, 1.2)
    captions, skipped, sent = _run(script, 0.1)
    assert skipped == 0 and sent == script
    assert [round(c.latency, 3) for c in captions] == [0.1, 0.1, 0.1]


def test_a_slow_server_gets_the_newest_partial_and_every_final() -> None:
    # updates at 1.2, 2.4, 3.6, 4.8 (partials) and 5.2 (final); 2.0 s a request
    script = schedule([(0, _updates(" ".join(f"w{i}" for i in range(13))))], 3, 1.2)
    captions, skipped, sent = _run(script, 2.0)
    # 1.2 sent (answered 3.2); 2.4 waits and goes at 3.2 (5.2); 3.6 and 4.8 come
    # meanwhile: 3.6 is skipped, then the final (5.2) replaces 4.8 too
    assert [u.index for u in sent] == [0, 1, 4]
    assert skipped == 2
    assert [round(c.latency, 3) for c in captions] == [2.0, 2.8, 2.0]
    assert captions[-1].update.final


def test_a_failed_request_is_a_caption_not_counted_in_the_latencies() -> None:
    script = schedule([(0, _updates("one two three four five six seven"))], 3, 1.2)
    captions, _, _ = _run(script, 0.1, fail={1})
    assert [c.ok for c in captions] == [True, False, True]
    figures = latency_figures(captions)
    assert figures["partial_n"] == 1 and figures["final_n"] == 1


def test_percentiles_interpolate_between_ranks() -> None:
    xs = [float(x) for x in range(1, 101)]
    assert percentile(xs, 50) == pytest.approx(50.5)
    assert percentile(xs, 90) == pytest.approx(90.1)
    assert percentile(xs, 99) == pytest.approx(99.01)
    assert percentile([3.0], 90) == 3.0
    assert percentile([], 50) is None
    assert percentile([2.0, 1.0], 100) == 2.0


def test_latency_figures_split_partials_from_finals() -> None:
    caps = [Caption(_spoken(0, 0), 0.5), Caption(_spoken(1, 1), 2.0),
            Caption(_spoken(2, 2, final=True), 3.0)]
    f = latency_figures(caps)
    assert f["partial_n"] == 2 and f["final_n"] == 1
    assert f["partial_p50"] == pytest.approx(0.75) and f["final_p99"] == 1.0
    assert latency_figures([])["final_p90"] is None


def _fig(p90: float, f90: float, errors: int = 0) -> dict:
    return {"partial_p90": p90, "final_p90": f90, "errors": errors}


def test_capacity_is_the_most_speakers_within_both_bounds_at_p90() -> None:
    rows = {1: _fig(0.5, 0.9), 2: _fig(0.6, 1.7), 4: _fig(0.9, 2.1), 8: _fig(2.0, 4.0)}
    assert capacity(rows) == 2  # four speakers' finals miss 2.0 s
    assert capacity(rows, final_bound=2.5) == 4
    # a count that passes above one that failed is not capacity
    assert capacity({1: _fig(0.5, 0.9), 2: _fig(1.1, 1.0), 4: _fig(0.9, 1.0)}) == 1
    assert capacity({1: _fig(1.5, 0.9)}) == 0
    assert capacity({1: _fig(0.5, 0.9, errors=1)}) == 0  # errors are no capacity
    assert capacity({1: {"partial_p90": None, "final_p90": 1.0}}) == 0
