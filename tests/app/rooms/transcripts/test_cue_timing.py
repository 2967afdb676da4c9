"""How long a caption cue is shown (``formats.cue_times``, the one rule of the transcript
download and the HLS segments): long enough to read, never overlapping the next cue."""

from __future__ import annotations

import random

import pytest

from app.rooms.transcripts.formats import (
    MIN_CUE_MS,
    cue_times,
    reading_ms,
    timed_cues,
)
from app.rooms.transcripts.store import TranscriptLine


@pytest.mark.parametrize(("text", "needed"), [
    ("Yes.", MIN_CUE_MS),  # a short text gets the floor
    ("x" * 15, 1000),  # 15 characters: one second at 15 a second
    ("x" * 90, 6000),
    ("日本語の字幕", MIN_CUE_MS),  # six wide characters weigh 12: 0.8 s, under the floor
    ("会" * 30, 4000),  # 30 wide characters weigh 60: four seconds
    ("Größe 🎉", MIN_CUE_MS),
])
def test_reading_time_grows_with_the_text_and_wide_characters_weigh_two(
        text: str, needed: int) -> None:
    assert reading_ms(text) == needed


def test_a_short_final_is_shown_as_long_as_its_text_takes_to_read() -> None:
    long_text = "This sentence came with its final at once, under load." * 2
    [(start, end)] = cue_times([(10.0, 10.0, long_text)])
    assert start == 10_000 and end == 10_000 + reading_ms(long_text) > 17_000
    [(start, end)] = cue_times([(10.0, 10.2, "Short.")])
    assert (start, end) == (10_000, 10_000 + MIN_CUE_MS)


def test_a_slow_final_keeps_its_own_end() -> None:
    assert cue_times([(1.0, 9.5, "Slow.")]) == [(1000, 9500)]


def test_back_to_back_cues_are_cut_at_the_next_start_and_never_overlap() -> None:
    text = "x" * 60  # needs 4 s
    times = cue_times([(0.0, 0.5, text), (2.0, 2.5, text), (10.0, 10.5, text)])
    assert times == [(0, 2000), (2000, 6000), (10_000, 14_000)]


def test_cjk_text_needs_longer_than_the_same_count_of_latin_letters() -> None:
    [(_, latin_end)] = cue_times([(0.0, 0.0, "a" * 30)])
    [(_, cjk_end)] = cue_times([(0.0, 0.0, "字" * 30)])
    assert latin_end == 2000 and cjk_end == 4000


def test_an_overlapping_final_is_not_cut_the_next_cue_waits_for_it() -> None:
    # one language's final of segment 0 came at 7 s, after segment 1's first caption (3 s)
    times = cue_times([(0.0, 7.0, "Late translated sentence."), (3.0, 4.0, "Next one.")])
    assert times == [(0, 7000), (7000, 8000)]


def test_a_burst_of_first_captions_is_spread_so_each_gets_the_floor() -> None:
    times = cue_times([(5.0, 5.0, "one"), (5.0, 5.0, "two"), (5.0, 5.0, "three")])
    assert times == [(5000, 6000), (6000, 7000), (7000, 8000)]


def test_cues_are_returned_in_the_given_order_though_timed_in_start_order() -> None:
    times = cue_times([(9.0, 10.0, "nine"), (1.0, 2.0, "one")])
    assert times == [(9000, 10_000), (1000, 2000)]


def test_lines_without_text_are_no_cue_and_do_not_cut_others() -> None:
    lines = [TranscriptLine(0, 0.0, 0.0, "s", "x" * 45), TranscriptLine(1, 1.0, 1.0, "s", " \n "),
             TranscriptLine(2, 5.0, 5.0, "s", "after")]
    assert [(line.segment, start, end) for line, _, start, end in timed_cues(lines)] == [
        (0, 0, 3000), (2, 5000, 6000)]


def test_random_talks_never_overlap_and_every_cue_has_its_floor_and_its_final() -> None:
    rng = random.Random(46)
    for _ in range(50):
        spans = []
        for _ in range(rng.randint(1, 40)):
            first = rng.choice([rng.uniform(0, 120), 30.0])  # some first captions at once
            text = rng.choice(["ok", "x" * rng.randint(1, 200), "字" * rng.randint(1, 60)])
            spans.append((first, first + rng.choice([0.0, 0.1, 0.5, 2.0, 9.0]), text))
        times = cue_times(spans)
        ordered = sorted(range(len(spans)), key=lambda i: times[i])
        for rank, i in enumerate(ordered):
            (start, end), (first, final, text) = times[i], spans[i]
            assert end - start >= MIN_CUE_MS
            assert start >= round(first * 1000)  # never before its first caption
            assert end >= round(final * 1000)  # shown until its final at least
            if rank + 1 == len(ordered):
                assert end - start >= reading_ms(text)
                continue
            next_start = times[ordered[rank + 1]][0]
            assert end <= next_start  # never overlaps the next cue
            # shorter than its text needs only when the next cue starts there
            assert end - start >= reading_ms(text) or end == next_start
