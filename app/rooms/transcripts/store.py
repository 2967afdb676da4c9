"""Talk transcripts: what one line is, and what every store (SQLite, Redis) offers.

A *talk* is one speaker's claim of a room (``app.rooms.registry``); its transcript is every final
caption, per language, timed from the talk's start. Both stores keep the same bounds, so a
room used all year, or a speaker who never stops, cannot fill the disk or Redis:

- ``MAX_TALKS_PER_ROOM`` talks per room (a new talk pushes out the oldest, with its lines);
- ``MAX_LINES_PER_TALK`` lines per talk and language (further lines are refused, logged
  once, never kept);
- ``MAX_TEXT_CHARS`` characters of source and of translation per line (cut);
- a retention (``serve --transcript-retention-days``, ``DEFAULT_RETENTION_DAYS``): a talk is
  gone that long after it started, so the number of rooms cannot grow them without end
  either (0 keeps transcripts until their room's newer talks push them out).

Writes are idempotent per (room, talk, language, segment): the recorder retries a write
after an outage without knowing whether the first attempt landed, and a line is kept once.

The bounds are read when a store is made (tests make smaller ones, or pass them in).
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

MAX_TALKS_PER_ROOM = 200
MAX_LINES_PER_TALK = 20_000  # per talk and language: hours of captions
MAX_TEXT_CHARS = 2_000
MAX_SECONDS = 10_000_000.0  # times past ~115 days are not a talk's; they are clamped
DEFAULT_RETENTION_DAYS = 30.0

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class TalkRecord:
    room: str
    talk_id: str          # 16 hex chars, made by the room registry when a speaker claims a room
    started_at: float     # unix epoch seconds
    langs: tuple[str, ...]


@dataclass(frozen=True)
class TranscriptLine:
    segment: int          # the caption's segment number
    start_s: float        # seconds from the talk's start to the segment's first caption
    end_s: float          # ... to its final caption
    source: str           # recognised/sent source text
    text: str             # the translation (final caption text)


class TranscriptStore(Protocol):
    async def start_talk(self, talk: TalkRecord) -> None: ...

    async def add(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None: ...

    async def talks(self, room: str) -> list[TalkRecord]: ...  # oldest first

    async def lines(self, room: str, talk_id: str, lang: str) -> list[TranscriptLine]:
        ...  # in segment order

    async def close(self) -> None: ...


class TranscriptUnavailable(RuntimeError):
    """the store cannot be reached (Redis down); callers buffer and retry"""


def clean_text(text: object) -> str:
    """Text fit to store: cut to ``MAX_TEXT_CHARS``; a lone surrogate (which UTF-8, SQLite
    and every download format refuse) becomes U+FFFD, so one bad caption cannot make the
    whole transcript unreadable."""
    return _SURROGATE.sub("\ufffd", str(text)[:MAX_TEXT_CHARS])


def clean_seconds(value: object) -> float:
    """A time in seconds from the talk's start, finite, not negative, to the millisecond."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(seconds) or seconds < 0:
        return 0.0
    return round(min(seconds, MAX_SECONDS), 3)


def clean_epoch(value: object) -> float:
    """A talk's start (unix seconds); one that is not a finite number is now (SQLite and
    Redis refuse NaN, and the talk is surely not older than its first write)."""
    try:
        epoch = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return time.time()
    return epoch if math.isfinite(epoch) else time.time()


def clean_line(line: TranscriptLine) -> TranscriptLine:
    """The line as both stores keep it (bounded text, sane times); ``ValueError`` for a
    segment that is not an integer (a caller's bug, not data to keep)."""
    if isinstance(line.segment, bool) or not isinstance(line.segment, int) or \
            not -(2 ** 62) < line.segment < 2 ** 62:
        raise ValueError("a transcript line's segment must be an integer")
    return TranscriptLine(segment=line.segment, start_s=clean_seconds(line.start_s),
                          end_s=clean_seconds(line.end_s), source=clean_text(line.source),
                          text=clean_text(line.text))


def clean_langs(*groups: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The languages of ``groups``, each once, in first-seen order."""
    seen: dict[str, None] = {}
    for group in groups:
        for lang in group:
            seen.setdefault(str(lang), None)
    return tuple(seen)


class FullWarnings:
    """Logs "this talk's transcript is full" once per (talk, language), not on every line
    after it; remembers a bounded number of them (a long-running server sees many talks).

    Room names are client text and never go into a log line: the talk id says which."""

    def __init__(self, log: logging.Logger, remember: int = 4096) -> None:
        self.log = log
        self.remember = remember
        self._warned: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def refused(self, room: str, talk_id: str, lang: str, limit: int) -> None:
        key = (room, talk_id, lang)
        if key in self._warned:
            return
        self._warned[key] = None
        if len(self._warned) > self.remember:
            self._warned.popitem(last=False)
        self.log.warning("transcript of talk %s (%s) holds %d lines, its bound: further "
                         "lines of it are not kept", talk_id[:32], lang[:16], limit)


def retention_seconds(days: float | None) -> float | None:
    """A retention in days as seconds; None (keep) for None, 0 or a negative number."""
    if days is None or not math.isfinite(days) or days <= 0:
        return None
    return days * 86400.0


def expired_before(retention_s: float | None, now: float | None = None) -> float:
    """The start time (unix seconds) before which a talk is expired; -inf when kept."""
    if retention_s is None:
        return -math.inf
    return (time.time() if now is None else now) - retention_s
