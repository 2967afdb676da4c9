"""The timeline of a talk's HLS subtitle rendition: which cues each WebVTT segment holds,
when it is published, and which segments a playlist lists (RFC 8216;
docs/captions-out-hls.md). What a player fetches is written by ``playlist``.

Pure logic, no I/O: ``source`` finds the talk, its lines and whether it runs, ``playlist``
writes the text, and ``route`` serves it.

**One clock.** A cue is a transcript line (``app.rooms.transcripts``) timed by the rule
the transcript download uses (``formats.cue_times``: from the segment's first caption, in
seconds from the talk's start, shown at least as long as its text takes to read, cut at
the next cue's start; see below for where the segments' times differ). Segment ``i``
covers talk seconds ``[i*D, (i+1)*D)`` (``D``: ``serve --hls-segment-s``). Every segment
starts with a timestamp map onto the video's presentation clock (``playlist``); the cue
times themselves stay the talk's, so a segment reads like the downloaded transcript.

**Segments never change once published.** A final is known only when it is made, up to
a few seconds after its cue starts, and a player never fetches a segment twice. So:

- segment ``i`` holds every cue that overlaps its window and whose final came before the
  window's end plus a *hold* of one segment (RFC 8216 wants every cue shown during a
  segment in it: a cue that spans windows is repeated in each; players drop repeats);
- segment ``i`` is published (listed, served) only once the talk's clock passed the end
  of its window plus the hold plus ``SETTLE_S`` (a final's write to the store, and the
  clocks of replicas, may lag that much), so everything it holds is in the store by then.

A cue whose final came later than the hold is missing from the segments published before
it was known and is in every later segment it overlaps, the one where it ends at least.
**Cue times once published never change** either (a cue repeated in several segments
must be the same cue for a player to drop the repeat, and a shorter copy would not take
back the longer one already shown). A cue is timed by the transcript's rule among the cues
known when the first segment holding it is published (``HlsTiming.as_published``). So a
cue published before the next cue's final was known keeps the length its text needs, and
the next cue starts when it ends rather than at its first caption; the transcript
download, timed with every final known, cuts the first cue at the next one's start
instead. That is the one way the segments' times differ from the download's, and it
happens whenever a cue's reading time reaches past what was known at its publication
(short segments make it more frequent). Every cue still ends at or after its final, so it
is in the segment where its final became known, or a later one.

The content of a segment is therefore a function of the store alone: every replica, every
request, live or after the talk, writes the same bytes. (Unless a final reaches the store
later than ``SETTLE_S`` after it was made: while the store is away the recorder keeps
finals and writes them when it is back, and segments published meanwhile lack them.)

**The playlist.** While the talk runs: the published segments of the last
``serve --hls-window-s`` (at least ``MIN_WINDOW_SEGMENTS``), ``EXT-X-MEDIA-SEQUENCE`` the
first one's index. Once the talk ended: every segment from 0 (bounded by
``ENDED_MAX_SEGMENTS``) and ``#EXT-X-ENDLIST``, so a player (or ``ffmpeg``) that comes after
the talk gets every cue; the segments it shares with the live playlist are the same ones
under the same sequence numbers. (RFC 8216 has a live playlist change only at its end and
drop segments only at its start; listing the earlier segments again once the talk is over is
a deliberate departure: players go by sequence numbers, and ffmpeg and hls.js follow it, as
the tests check.) The ended playlist reaches at least as far as any live playlist did (the
*live edge* ``source`` keeps) and as far as the last cue.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from app.rooms.transcripts.formats import (
    MIN_CUE_MS,
    caption_text,
    cue_times,
    reading_ms,
    seconds_ms,
)
from app.rooms.transcripts.store import MAX_SECONDS, TranscriptLine

SETTLE_S = 1.0  # a final's way into the store, and replicas' clocks, may lag this much
MIN_WINDOW_SEGMENTS = 3  # RFC 8216 6.2.2: a live playlist spans three target durations
ENDED_MAX_SEGMENTS = 10_800  # an ended playlist's bound: 12 hours of 4-second segments


@dataclass(frozen=True)
class Cue:
    """A transcript line as a cue: its times in milliseconds (``start_ms``, ``end_ms``, as
    ``formats.cue_times`` gives them among the cues it was timed with), when its final was
    known (talk seconds), its one-line text, and the line's own times in seconds (its
    first caption and its final: what a cue is timed from)."""

    segment: int
    start_ms: int
    end_ms: int
    known_s: float
    text: str
    first_s: float = 0.0
    final_s: float = 0.0


def timed(cues: Sequence[Cue]) -> list[Cue]:
    """``cues`` timed among themselves (``formats.cue_times``), in their order."""
    times = cue_times([(cue.first_s, cue.final_s, cue.text) for cue in cues])
    return [replace(cue, start_ms=start, end_ms=end)
            for cue, (start, end) in zip(cues, times, strict=True)]


def cues_of(lines: Iterable[TranscriptLine]) -> list[Cue]:
    """The lines that make a cue (text left after cleaning), timed as the transcript
    download times them (all of them known)."""
    cues = []
    for line in lines:
        text = caption_text(line.text)
        if text:
            cues.append(Cue(line.segment, 0, 0, float(line.end_s), text,
                            float(line.start_s), float(line.end_s)))
    return timed(cues)


@dataclass(frozen=True)
class HlsTiming:
    """Segment length and live window (``serve --hls-segment-s``, ``--hls-window-s``)."""

    segment_s: int = 4
    window_s: int = 60

    def __post_init__(self) -> None:
        if self.segment_s < 1 or self.window_s < 1:
            raise ValueError("segment_s and window_s must be at least 1")

    @property
    def hold_s(self) -> float:
        """How long after its window a segment still takes finals of cues that began in it."""
        return float(self.segment_s)

    @property
    def window_segments(self) -> int:
        return max(MIN_WINDOW_SEGMENTS, math.ceil(self.window_s / self.segment_s))

    @property
    def max_segments(self) -> int:
        """Segments in the longest talk the transcript can time."""
        return math.ceil(MAX_SECONDS / self.segment_s) + 1

    def ready_at(self, index: int) -> float:
        """The talk second from which segment ``index`` is published."""
        return (index + 1) * self.segment_s + self.hold_s + SETTLE_S

    def published(self, talk_s: float) -> int:
        """How many segments (0..n-1) are published at talk second ``talk_s``."""
        if not math.isfinite(talk_s):
            return 0
        count = math.floor((talk_s - self.hold_s - SETTLE_S) / self.segment_s)
        return min(max(count, 0), self.max_segments)

    def covering(self, seconds: float) -> int:
        """How many segments cover the talk's first ``seconds``."""
        if not math.isfinite(seconds) or seconds <= 0:
            return 0
        return min(math.ceil(seconds / self.segment_s - 1e-9), self.max_segments)

    def ended_count(self, edge_s: float, cues: Iterable[Cue]) -> int:
        """Segments of an ended talk: as far as any live playlist reached (``edge_s``) and
        as far as the last cue."""
        last_ms = max((cue.end_ms for cue in cues), default=0)
        return max(self.covering(edge_s), self.covering(last_ms / 1000))

    def in_segment(self, cues: Iterable[Cue], index: int) -> list[Cue]:
        """The cues of segment ``index`` (see the module's docstring), in segment order."""
        start_ms = index * self.segment_s * 1000
        end_ms = start_ms + self.segment_s * 1000
        known_by = (index + 1) * self.segment_s + self.hold_s
        return [cue for cue in cues
                if cue.start_ms < end_ms and cue.end_ms > start_ms and cue.known_s < known_by]

    def known_at(self, known_s: float) -> int:
        """The first segment that may hold a cue whose final came at talk second
        ``known_s`` (the one whose window's end plus the hold is after it)."""
        if not math.isfinite(known_s):
            return 0
        return max(0, math.floor((known_s - self.hold_s) / self.segment_s))

    def as_published(self, cues: Sequence[Cue]) -> list[Cue]:
        """``cues`` timed as the segments publish them (see the module's docstring), in
        their order: segment by segment, the cues known by then are timed by
        ``formats.cue_times``'s rule around those already published, which keep their
        times."""
        return _Publication(self, cues).run()


class _Publication:
    """``HlsTiming.as_published``: walks the segments in order. At segment ``k`` the cues
    known by then (``known_at``) and not yet published are placed by the transcript's
    rule around the published ones (which keep their times): in order of first caption,
    each starts at its first caption but not before the cue before it starts plus
    ``MIN_CUE_MS``, nor before the earlier cues' finals or a published cue's end; one that
    cannot start ``MIN_CUE_MS`` before a published cue (and end after its own final)
    goes after it; each ends at its final or once read, cut at the next cue's start.
    Those that overlap window ``k`` are then published. Segments in which nothing new is
    known and nothing waits are skipped."""

    def __init__(self, timing: HlsTiming, cues: Sequence[Cue]) -> None:
        self.timing, self.cues = timing, list(cues)
        self.window_ms = timing.segment_s * 1000
        self.times: list[tuple[int, int]] = [(cue.start_ms, cue.end_ms) for cue in cues]
        self.starts: list[int] = []  # published cues, by start (they never overlap)
        self.ends: list[int] = []

    def run(self) -> list[Cue]:
        known_at = [self.timing.known_at(cue.known_s) for cue in self.cues]
        arrival = sorted(range(len(self.cues)), key=lambda i: known_at[i])
        waiting: list[int] = []  # known, not published
        step, arrived = 0, 0
        while arrived < len(arrival) or waiting:
            due = [self.times[i][0] // self.window_ms for i in waiting]
            if arrived < len(arrival):
                due.append(known_at[arrival[arrived]])
            step = max(step, min(due))  # the next segment where something happens
            while arrived < len(arrival) and known_at[arrival[arrived]] <= step:
                waiting.append(arrival[arrived])
                arrived += 1
            self._place(waiting)
            # those starting by the window's end are published now (each ends after the
            # window's start: it ends at or after its final, known by then)
            window_end = (step + 1) * self.window_ms
            for i in waiting:
                start, end = self.times[i]
                if start < window_end:
                    at = bisect_right(self.starts, start)
                    self.starts.insert(at, start)
                    self.ends.insert(at, end)
            waiting = [i for i in waiting if self.times[i][0] >= window_end]
            step += 1
        return [replace(cue, start_ms=start, end_ms=end)
                for cue, (start, end) in zip(self.cues, self.times, strict=True)]

    def _place(self, waiting: list[int]) -> None:
        """Times the waiting cues around the published ones (see the class)."""
        if not waiting:
            return
        cues = self.cues
        waiting.sort(key=lambda i: (seconds_ms(cues[i].first_s), i))
        pinned = bisect_right(self.ends, seconds_ms(cues[waiting[0]].first_s))
        floor, placed = 0, []
        for i in waiting:
            final = seconds_ms(cues[i].final_s)
            start = max(seconds_ms(cues[i].first_s), floor)
            while pinned < len(self.starts) and \
                    self.starts[pinned] < max(start + MIN_CUE_MS, final):
                start = max(start, self.ends[pinned])  # it goes after this published one
                pinned += 1
            placed.append(i)
            self.times[i] = (start, 0)
            floor = max(start + MIN_CUE_MS, floor, final)
        for rank, i in enumerate(placed):  # placed in order of start
            start = self.times[i][0]
            end = max(seconds_ms(cues[i].final_s), start + reading_ms(cues[i].text))
            if rank + 1 < len(placed):
                end = min(end, self.times[placed[rank + 1]][0])
            later = bisect_right(self.starts, start)
            if later < len(self.starts):
                end = min(end, self.starts[later])
            self.times[i] = (start, end)


def live_range(timing: HlsTiming, published: int) -> tuple[int, int]:
    """(first, count) of a running talk's playlist: its last published segments."""
    count = min(published, timing.window_segments)
    return published - count, count


def ended_range(total: int) -> tuple[int, int]:
    """(first, count) of an ended talk's playlist: all of it, within the bound."""
    count = min(total, ENDED_MAX_SEGMENTS)
    return total - count, count
