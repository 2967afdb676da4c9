"""Transcript files: each format read back with the library that reads it (webvtt-py, srt,
json) gives the same cues, texts and times, hostile caption text included."""

from __future__ import annotations

import html
import json

import pytest
import srt
import webvtt

from app.rooms.transcripts.formats import FORMATS, MIN_CUE_MS, caption_text, render
from app.rooms.transcripts.store import TalkRecord, TranscriptLine

TALK = TalkRecord(room="keynote-1", talk_id="0123456789abcdef", started_at=1_764_000_000.5,
                  langs=("de", "ja"))
HOSTILE = [
    "a --> b",
    "00:00:01.000 --> 00:00:02.000",
    "00:00:01,000 --> 00:00:02,000 also SubRip",
    "first\n\nsecond",
    "\nleading newline",
    "trailing newline\n",
    "NOTE looks like a comment",
    "12",
    "ctrl\x00\x07\x1b[31m\x7f\x85\u2028\u2029\x0b\x0c chars",
    "<b>bold</b> & <script>alert(1)</script> &amp;",
    "lone \ud800 surrogate",
    "x" * 10_000,
    "Größe 日本語 🎉",
]


def _lines(texts: list[str]) -> list[TranscriptLine]:
    return [TranscriptLine(segment=i, start_s=i * 2.0, end_s=i * 2.0 + 1.25,
                           source=f"source {i}", text=text) for i, text in enumerate(texts)]


def _expected(texts: list[str]) -> list[str]:
    return [caption_text(text) for text in texts if caption_text(text)]


def test_caption_text_is_one_line_without_control_characters() -> None:
    for text in HOSTILE:
        clean = caption_text(text)
        assert clean == clean.strip() and "\n" not in clean and "\r" not in clean
        assert "  " not in clean
        assert not any(ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F for ch in clean)
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in clean)
        clean.encode("utf-8")
    assert caption_text("first\n\nsecond") == "first second"
    assert caption_text(" \n\t ") == ""


def test_webvtt_reads_back_every_cue_with_its_text_time_and_segment() -> None:
    lines = _lines(HOSTILE)
    body, media_type = render(TALK, "de", lines, "vtt")
    assert media_type == "text/vtt" and body.startswith("WEBVTT")
    body.encode("utf-8")
    parsed = webvtt.from_string(body, strict=True)
    assert len(parsed.captions) == len(_expected(HOSTILE))
    assert [html.unescape(c.text) for c in parsed.captions] == _expected(HOSTILE)
    assert [c.identifier for c in parsed.captions] == [str(line.segment) for line in lines]
    # 29 characters are read in 1.934 s at 15 a second: longer than the final's 1.25 s
    assert parsed.captions[1].start == "00:00:02.000" and parsed.captions[1].end == "00:00:03.934"
    assert any("0123456789abcdef" in comment for comment in parsed.header_comments)


def test_subrip_reads_back_every_cue_with_its_text_and_time() -> None:
    body, media_type = render(TALK, "de", _lines(HOSTILE), "srt")
    assert media_type == "application/x-subrip"
    parsed = list(srt.parse(body))
    assert [s.content for s in parsed] == _expected(HOSTILE)
    assert [s.index for s in parsed] == list(range(1, len(parsed) + 1))
    assert parsed[1].start.total_seconds() == 2.0 and parsed[1].end.total_seconds() == 3.934


def test_text_has_one_line_per_final() -> None:
    body, media_type = render(TALK, "de", _lines(HOSTILE), "txt")
    assert media_type == "text/plain"
    assert body.splitlines() == _expected(HOSTILE)


def test_json_keeps_the_text_as_it_was_said() -> None:
    lines = _lines(HOSTILE)
    body, media_type = render(TALK, "ja", lines, "json")
    assert media_type == "application/json"
    data = json.loads(body)
    assert {k: data[k] for k in ("room", "talk_id", "lang", "started_at")} == {
        "room": "keynote-1", "talk_id": "0123456789abcdef", "lang": "ja",
        "started_at": 1_764_000_000.5}
    assert len(data["lines"]) == len(lines)
    assert data["lines"][3] == {"segment": 3, "start": 6.0, "end": 7.25,
                                "source": "source 3", "text": "first\n\nsecond"}
    assert data["lines"][10]["text"] == "lone \ufffd surrogate"
    body.encode("utf-8")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_an_empty_transcript_is_a_valid_empty_file(fmt: str) -> None:
    body, _ = render(TALK, "de", [], fmt)
    if fmt == "vtt":
        assert webvtt.from_string(body).captions == []
    elif fmt == "srt":
        assert list(srt.parse(body)) == []
    elif fmt == "txt":
        assert body == ""
    else:
        assert json.loads(body)["lines"] == []


def test_a_cue_always_ends_after_it_starts() -> None:
    lines = [TranscriptLine(0, 5.0, 5.0, "s", "same time"),
             TranscriptLine(1, 7.0, 6.0, "s", "ends first"),
             TranscriptLine(2, 8.0001, 8.0004, "s", "same millisecond")]
    vtt = webvtt.from_string(render(TALK, "de", lines, "vtt")[0])
    subs = list(srt.parse(render(TALK, "de", lines, "srt")[0]))
    for cue, line in zip(vtt.captions, lines, strict=True):
        assert cue.end_time.in_milliseconds() > cue.start_time.in_milliseconds()
        assert cue.start_time.in_milliseconds() == round(line.start_s * 1000)
    assert vtt.captions[0].end_time.in_milliseconds() == 5000 + MIN_CUE_MS
    for sub in subs:
        assert sub.end > sub.start


def test_segment_order_is_kept_even_when_times_disagree() -> None:
    lines = [TranscriptLine(0, 9.0, 10.0, "s", "zero"), TranscriptLine(1, 1.0, 2.0, "s", "one")]
    assert [s.content for s in srt.parse(render(TALK, "de", lines, "srt")[0])] == ["zero", "one"]


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="vtt, srt, txt, json"):
        render(TALK, "de", [], "pdf")
