"""A talk's transcript as a file: WebVTT, SubRip, plain text or JSON.

Caption text is whatever the model wrote, so it may hold what would break a caption file:
``-->`` (starts a cue), blank lines (end one), control characters, markup. In the caption
formats each caption becomes one line: whitespace runs (newlines included) and control
characters collapse into single spaces, and WebVTT escapes ``&``, ``<`` and ``>`` as
character references (so ``-->`` is written ``--&gt;`` and no text reads as a cue tag).
A cue is timed by ``cue_times``, the one rule the HLS rendition
(``app.rooms.hls.timeline``) uses too: from its segment's first caption, shown at least as
long as its text takes to read, never overlapping the next cue. A line with no text left
is not a cue. JSON keeps the text and the times as stored: it needs no such care.

Lines arrive in segment order and stay in it: SubRip is written without re-sorting.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import re
import unicodedata
from collections.abc import Sequence

import srt
import webvtt

from app.rooms.transcripts.store import TalkRecord, TranscriptLine

# Reading speed. Subtitle guidelines give adults 15-17 characters a second (Netflix's
# Timed Text Style Guide: up to 17 for adult programmes; BBC: 160-180 words a minute, about
# 15 characters a second); live captions cannot be edited for reading, so the lower end.
READING_CPS = 15
# A wide character (CJK ideographs, kana, Hangul: East Asian Width W or F) counts as two,
# so CJK reads at 7.5 characters a second (Netflix: 9 for Chinese, 12 for Korean, 4 for
# Japanese: Japanese cues need more than this floor gives them).
WIDE_WEIGHT = 2
# No cue is shorter than this, however short its text: a second, above Netflix's minimum
# event duration of 5/6 s (and a final that came with its first caption has end == start).
MIN_CUE_MS = 1000
# format -> (media type, file extension)
FORMATS: dict[str, tuple[str, str]] = {
    "vtt": ("text/vtt", "vtt"),
    "srt": ("application/x-subrip", "srt"),
    "txt": ("text/plain", "txt"),
    "json": ("application/json", "json"),
}
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc


def caption_text(text: str) -> str:
    """``text`` as one caption line: control characters become spaces, runs of whitespace
    (newlines, U+2028 and the like) one space, no space at either end; lone surrogates
    U+FFFD."""
    text = _SURROGATE.sub("\ufffd", str(text))
    text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


def reading_ms(text: str) -> int:
    """How long ``text`` (one caption line) takes to read, in milliseconds: its characters
    at ``READING_CPS`` (wide ones weighing ``WIDE_WEIGHT``), never under ``MIN_CUE_MS``."""
    weight = sum(WIDE_WEIGHT if unicodedata.east_asian_width(ch) in "WF" else 1
                 for ch in text)
    return max(MIN_CUE_MS, math.ceil(weight * 1000 / READING_CPS))


def cue_times(spans: Sequence[tuple[float, float, str]]) -> list[tuple[int, int]]:
    """Each cue's (start, end) in whole milliseconds, for spans of (seconds to the
    segment's first caption, seconds to its final, one-line text), in the spans' order.

    Why not simply (first caption, final): under load a final can come with its first
    caption (``end == start``) or a fraction of a second after it, and a sentence flashed
    for 0.5 s is not read; and with several languages one language's final can come after
    the next segment's first caption, so the cues would overlap. So, taking the cues in
    order of their first caption (then their order in ``spans``), a cue

    - starts at its first caption, but not before the cues before it have their finals
      (a text still being written is not cut; the next one waits for it) nor less than
      ``MIN_CUE_MS`` after the cue before it starts (first captions that came in one
      burst are spread out, so each gets the floor rather than none);
    - ends at its final or when its text has been read (``reading_ms``), whichever is
      later,
    - but never after the next cue starts: it is cut there (the only way a cue is shorter
      than its text needs).

    So cues never overlap, each lasts at least ``MIN_CUE_MS``, and each ends at or after
    its final (which is what keeps every cue in an HLS segment published after its final
    was known: ``app.rooms.hls.timeline``). The transcript download and the HLS segments
    both time cues here."""
    order = sorted(range(len(spans)), key=lambda i: (seconds_ms(spans[i][0]), i))
    starts: list[int] = []
    finals = 0  # the latest final of the cues so far
    for i in order:
        start = seconds_ms(spans[i][0])
        if starts:
            start = max(start, starts[-1] + MIN_CUE_MS, finals)
        starts.append(start)
        finals = max(finals, seconds_ms(spans[i][1]))
    times: list[tuple[int, int]] = [(0, 0)] * len(spans)
    for rank, i in enumerate(order):
        start = starts[rank]
        _, final_s, text = spans[i]
        end = max(seconds_ms(final_s), start + reading_ms(text))
        if rank + 1 < len(order):
            end = min(end, starts[rank + 1])
        times[i] = (start, end)
    return times


def seconds_ms(seconds: float) -> int:
    """Seconds from the talk's start in whole milliseconds (0 for what is not a positive
    finite number)."""
    value = float(seconds)
    return round(value * 1000) if math.isfinite(value) and value > 0 else 0


def _finite(value: float) -> float:
    """A number JSON can carry (NaN and infinities are not JSON)."""
    number = float(value)
    return number if math.isfinite(number) else 0.0


def _vtt_timestamp(ms: int) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def timed_cues(lines: Sequence[TranscriptLine]) -> list[tuple[TranscriptLine, str, int, int]]:
    """The lines that make a cue, each with its one-line text, start and end (ms), in the
    lines' order."""
    texts = [(line, caption_text(line.text)) for line in lines]
    kept = [(line, text) for line, text in texts if text]
    times = cue_times([(line.start_s, line.end_s, text) for line, text in kept])
    return [(line, text, start, end)
            for (line, text), (start, end) in zip(kept, times, strict=True)]


def _started(talk: TalkRecord) -> str:
    try:
        when = dt.datetime.fromtimestamp(float(talk.started_at), dt.UTC)
    except (OverflowError, OSError, ValueError):
        return "?"
    return when.isoformat(timespec="seconds")


def to_vtt(talk: TalkRecord, lang: str, lines: list[TranscriptLine]) -> str:
    captions = []
    for line, text, start, end in timed_cues(lines):
        captions.append(webvtt.Caption(_vtt_timestamp(start), _vtt_timestamp(end),
                                       html.escape(text, quote=False),
                                       identifier=str(line.segment)))
    # room names, talk ids and language codes are a safe charset: fit for a NOTE
    note = (f"{caption_text(talk.room)} {caption_text(lang)} talk "
            f"{caption_text(talk.talk_id)} started {_started(talk)}")
    return webvtt.WebVTT(captions=captions,
                         header_comments=[note.replace("-->", "->")]).content


def to_srt(lines: list[TranscriptLine]) -> str:
    subtitles = []
    for index, (_, text, start, end) in enumerate(timed_cues(lines), start=1):
        subtitles.append(srt.Subtitle(index=index, start=dt.timedelta(milliseconds=start),
                                      end=dt.timedelta(milliseconds=end), content=text))
    return srt.compose(subtitles, reindex=False)


def to_txt(lines: list[TranscriptLine]) -> str:
    texts = [text for text in (caption_text(line.text) for line in lines) if text]
    return "\n".join(texts) + "\n" if texts else ""


def to_json(talk: TalkRecord, lang: str, lines: list[TranscriptLine]) -> str:
    def clean(text: str) -> str:
        return _SURROGATE.sub("\ufffd", str(text))

    return json.dumps({
        "room": talk.room, "talk_id": talk.talk_id, "lang": lang,
        "started_at": _finite(talk.started_at),
        "lines": [{"segment": line.segment, "start": _finite(line.start_s),
                   "end": _finite(line.end_s),
                   "source": clean(line.source), "text": clean(line.text)}
                  for line in lines],
    }, ensure_ascii=False)


def render(talk: TalkRecord, lang: str, lines: list[TranscriptLine],
           fmt: str) -> tuple[str, str]:
    """The transcript of ``talk`` in ``lang`` as ``fmt`` (one of ``FORMATS``): (body,
    media type). ``ValueError`` for another format."""
    if fmt == "vtt":
        body = to_vtt(talk, lang, lines)
    elif fmt == "srt":
        body = to_srt(lines)
    elif fmt == "txt":
        body = to_txt(lines)
    elif fmt == "json":
        body = to_json(talk, lang, lines)
    else:
        raise ValueError(f"unknown transcript format; choose one of {', '.join(FORMATS)}")
    return body, FORMATS[fmt][0]
