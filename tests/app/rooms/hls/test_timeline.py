"""The HLS subtitle rendition's timeline without a server or a model: which cues a segment
holds and when it is published, the ranges a playlist lists, and cue times that never change
once published (``app.rooms.hls.timeline``)."""

from __future__ import annotations

import random

import pytest

from app.rooms.hls.timeline import (
    ENDED_MAX_SEGMENTS,
    SETTLE_S,
    HlsTiming,
    cues_of,
    ended_range,
    live_range,
)
from app.rooms.transcripts.formats import MIN_CUE_MS, reading_ms, timed_cues
from app.rooms.transcripts.store import TranscriptLine

T = HlsTiming(segment_s=2, window_s=6)


def line(segment: int, start: float, end: float, text: str = "") -> TranscriptLine:
    return TranscriptLine(segment, start, end, f"src {segment}", text or f"cue {segment}")


# -- the timeline ------------------------------------------------------------------------
def test_a_segment_is_published_one_segment_and_a_settle_after_its_window() -> None:
    assert T.published(0.0) == 0
    first = 2 * T.segment_s + SETTLE_S  # window [0, 2) + a hold of 2 s + the settle
    assert T.ready_at(0) == first
    assert T.published(first - 0.001) == 0 and T.published(first) == 1
    assert T.published(first + 2) == 2
    assert T.published(float("nan")) == 0 and T.published(-5.0) == 0


def test_a_cue_is_in_every_segment_it_overlaps_once_its_final_is_known() -> None:
    cues = cues_of([line(0, 0.5, 1.0), line(1, 1.5, 4.5), line(2, 4.0, 9.0)])
    in_seg = {i: [c.segment for c in T.in_segment(cues, i)] for i in range(6)}
    # cue 1 (1.5-4.5 s) overlaps windows 0, 1 and 2; its final (4.5 s) came after window
    # 0's end plus the hold (4 s), within window 1's (6 s): it is in segments 1 and 2.
    # Cue 2 (4-9 s): its final came after window 2's hold (8 s), so it is in 3 and 4 only.
    assert in_seg == {0: [0], 1: [1], 2: [1], 3: [2], 4: [2], 5: []}
    # (segment 0 is out at 5 s: the settle is the margin for the write, not more hold)


def test_every_cue_is_in_the_segment_where_it_ends() -> None:
    rng = random.Random(7)
    lines = []
    for seg in range(300):
        start = rng.uniform(0, 600)
        lines.append(line(seg, start, start + rng.choice([0, 0.2, 1, 3, 9, 30])))
    cues = cues_of(lines)
    total = T.ended_count(0.0, cues)
    held = {c.segment for i in range(total) for c in T.in_segment(cues, i)}
    assert held == set(range(300))
    for cue in cues:  # the segment of its end holds it (once every cue is known, with the
        # transcript's times)
        index = (cue.end_ms - 1) // (T.segment_s * 1000)
        assert cue.segment in {c.segment for c in T.in_segment(cues, index)}
    assert [(c.start_ms, c.end_ms) for c in cues] == [(s, e) for *_, s, e in timed_cues(lines)]


def test_live_and_ended_ranges() -> None:
    assert T.window_segments == 3
    assert HlsTiming(4, 60).window_segments == 15
    assert HlsTiming(10, 5).window_segments == 3  # never fewer than three
    assert live_range(T, 0) == (0, 0) and live_range(T, 2) == (0, 2)
    assert live_range(T, 10) == (7, 3)
    assert ended_range(10) == (0, 10)
    assert ended_range(ENDED_MAX_SEGMENTS + 5) == (5, ENDED_MAX_SEGMENTS)
    cues = cues_of([line(0, 0.0, 3.1)])
    assert T.ended_count(0.0, cues) == 2  # the last cue ends in window 1
    assert T.ended_count(20.0, cues) == 10  # a live playlist reached 20 s: never shorter
    assert T.ended_count(0.0, []) == 0
    with pytest.raises(ValueError):
        HlsTiming(0, 60)


# -- cue times as published ----------------------------------------------------------------
def test_without_late_finals_segments_have_the_transcripts_times() -> None:
    lines = [line(seg, seg * 1.5, seg * 1.5 + 0.3, "x" * (5 + 7 * seg)) for seg in range(12)]
    assert T.as_published(cues_of(lines)) == cues_of(lines)


def test_a_cue_published_before_the_next_final_keeps_its_length_and_the_next_one_waits() -> None:
    text = "x" * 60  # needs 4 s
    lines = [line(0, 0.0, 0.2, text), line(1, 1.0, 9.0, "late final")]
    # the download cuts cue 0 at cue 1's first caption...
    assert [(c.start_ms, c.end_ms) for c in cues_of(lines)] == [(0, 1000), (1000, 9000)]
    # ...but segment 0 was published (at 5 s) before cue 1's final (9 s) was known
    published = T.as_published(cues_of(lines))
    assert [(c.start_ms, c.end_ms) for c in published] == [(0, 4000), (4000, 9000)]
    assert [c.segment for c in T.in_segment(published, 0)] == [0]
    assert [c.segment for c in T.in_segment(published, 3)] == [1]  # known at 9 s < 10 s


def _published_segments(lines: list[TranscriptLine], timing: HlsTiming,
                        upto: int) -> list[list]:
    """What each segment held when it was published: from the lines whose final was made
    by then, as a live talk's store held them."""
    segments = []
    for index in range(upto):
        known = [x for x in lines if x.end_s < timing.ready_at(index) - SETTLE_S]
        segments.append(timing.in_segment(timing.as_published(cues_of(known)), index))
    return segments


@pytest.mark.parametrize("seed", range(6))
def test_published_cues_never_change_never_overlap_and_are_long_enough(seed: int) -> None:
    rng = random.Random(seed)
    timing = HlsTiming(segment_s=rng.choice([1, 2, 4]), window_s=6)
    lines, clock = [], 0.0
    for seg in range(60):
        clock += rng.choice([0.0, 0.1, 0.4, 1.0, 2.5])  # bursts and pauses
        lag = rng.choice([0.0, 0.05, 0.5, 2.0, 7.0, 15.0])  # finals at once, late, very late
        lines.append(line(seg, clock, clock + lag, rng.choice(
            ["Yes.", "x" * rng.randint(10, 160), "字" * rng.randint(2, 40)])))
    final = timing.as_published(cues_of(lines))
    total = timing.ended_count(0.0, final)
    live = _published_segments(lines, timing, total)
    held: set[int] = set()
    for index in range(total):  # a segment holds the same cues live and after the talk
        assert live[index] == timing.in_segment(final, index), index
        held |= {c.segment for c in live[index]}
    assert held == set(range(60))  # every final is in a segment
    ordered = sorted(final, key=lambda c: c.start_ms)
    for cue, nxt in zip(ordered, [*ordered[1:], None], strict=True):
        assert cue.end_ms - cue.start_ms >= MIN_CUE_MS
        assert cue.end_ms >= round(cue.final_s * 1000)
        if nxt is not None:
            assert cue.end_ms <= nxt.start_ms
            assert cue.end_ms - cue.start_ms >= reading_ms(cue.text) or \
                cue.end_ms == nxt.start_ms
