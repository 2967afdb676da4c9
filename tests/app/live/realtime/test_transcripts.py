"""Per-segment text as one append-only stream of deltas."""

from __future__ import annotations

from app.live.realtime.transcripts import TranscriptStream


def test_segments_join_with_a_space_and_grow_by_their_new_text() -> None:
    t = TranscriptStream("de")
    assert t.extend(0, "Guten") == "Guten"
    assert t.extend(0, "Guten Tag") == " Tag"
    assert t.extend(0, "Guten Tag") == ""
    assert t.extend(1, " Danke.") == " Danke."


def test_sent_text_is_never_revised_and_late_segments_are_dropped() -> None:
    t = TranscriptStream("en")
    t.extend(3, "one two")
    assert t.extend(3, "one three") == ""
    assert t.extend(2, "late") == ""
    assert t.extend(4, "") == ""


def test_languages_without_spaces_join_without_one() -> None:
    t = TranscriptStream("ja")
    assert t.extend(0, "こんにちは") + t.extend(1, "ありがとう") == "こんにちはありがとう"


def test_the_concatenated_deltas_are_the_segments_texts() -> None:
    t = TranscriptStream("en")
    steps = [(0, "a"), (0, "a b"), (1, "c"), (1, "c d e"), (2, "f")]
    out = "".join(t.extend(s, text) for s, text in steps)
    assert out == "a b c d e f"
