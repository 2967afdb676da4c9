"""A talk's transcript as a file: WebVTT, SubRip, plain text or JSON.

Caption text is whatever the model wrote, so it may hold what would break a caption file:
``-->`` (starts a cue), blank lines (end one), control characters, markup. In the caption
formats each caption becomes one line: whitespace runs (newlines included) and control
characters collapse into single spaces, and WebVTT escapes ``&``, ``<`` and ``>`` as
character references (so ``-->`` is written ``--&gt;`` and no text reads as a cue tag).
Every cue lasts at least ``MIN_CUE_MS`` (a final that came with its first caption has
``end == start``, which players drop). A line with no text left is not a cue. JSON keeps
the text as stored: it needs no such care.

Lines arrive in segment order and stay in it: SubRip is written without re-sorting.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import re

import srt
import webvtt

from app.rooms.transcripts.store import TalkRecord, TranscriptLine

MIN_CUE_MS = 500
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


def cue_ms(line: TranscriptLine) -> tuple[int, int]:
    """A cue's (start, end) in whole milliseconds; the end at least ``MIN_CUE_MS`` after
    the start when it is not after it."""
    start = _ms(line.start_s)
    end = _ms(line.end_s)
    return start, end if end > start else start + MIN_CUE_MS


def _ms(seconds: float) -> int:
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


def _cues(lines: list[TranscriptLine]) -> list[tuple[TranscriptLine, str]]:
    """The lines that make a cue, each with its one-line text."""
    cues = []
    for line in lines:
        text = caption_text(line.text)
        if text:
            cues.append((line, text))
    return cues


def _started(talk: TalkRecord) -> str:
    try:
        when = dt.datetime.fromtimestamp(float(talk.started_at), dt.UTC)
    except (OverflowError, OSError, ValueError):
        return "?"
    return when.isoformat(timespec="seconds")


def to_vtt(talk: TalkRecord, lang: str, lines: list[TranscriptLine]) -> str:
    captions = []
    for line, text in _cues(lines):
        start, end = cue_ms(line)
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
    for index, (line, text) in enumerate(_cues(lines), start=1):
        start, end = cue_ms(line)
        subtitles.append(srt.Subtitle(index=index, start=dt.timedelta(milliseconds=start),
                                      end=dt.timedelta(milliseconds=end), content=text))
    return srt.compose(subtitles, reindex=False)


def to_txt(lines: list[TranscriptLine]) -> str:
    texts = [text for _, text in _cues(lines)]
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
