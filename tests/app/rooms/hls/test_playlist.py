"""What an HLS player fetches of a talk's subtitles, without a server: the WebVTT segment
and playlist text (read back by ``webvtt-py`` and ``m3u8``) and the timestamp map
(``app.rooms.hls.playlist``)."""

from __future__ import annotations

import m3u8
import pytest
import webvtt

from app.rooms.hls.playlist import (
    MAX_OFFSET_S,
    clean_offset,
    render_playlist,
    render_segment,
    timestamp_map,
)
from app.rooms.hls.timeline import HlsTiming, cues_of
from app.rooms.transcripts.store import TranscriptLine

T = HlsTiming(segment_s=2, window_s=6)


def line(segment: int, start: float, end: float, text: str = "") -> TranscriptLine:
    return TranscriptLine(segment, start, end, f"src {segment}", text or f"cue {segment}")


# -- the texts -----------------------------------------------------------------------------
def test_a_segment_is_webvtt_with_the_timestamp_map_and_escaped_cues() -> None:
    cues = cues_of([line(3, 1.25, 1.25, "a <b> & --> c\nd"), line(4, 2.0, 3.0, " \n ")])
    text = render_segment(T.in_segment(cues, 0), 1.5)
    assert text.startswith("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000\n")
    assert text.endswith("\n\n")  # a concatenating reader sees the next header on its own
    parsed = webvtt.from_string(text, strict=True)
    assert parsed.metadata == ["X-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000"]
    [cap] = parsed.captions  # the blank line is no cue
    # 15 characters: read in 1 s, the floor
    assert (cap.identifier, cap.start, cap.end) == ("3", "00:00:01.250", "00:00:02.250")
    assert cap.text == "a &lt;b&gt; &amp; --&gt; c d"
    empty = webvtt.from_string(render_segment([], 0.0), strict=True)
    assert empty.captions == []


@pytest.mark.parametrize(("offset", "header"), [
    (0.0, "MPEGTS:0,LOCAL:00:00:00.000"),
    (10.0, "MPEGTS:900000,LOCAL:00:00:00.000"),
    (1.4, "MPEGTS:126000,LOCAL:00:00:00.000"),
    (-3.5, "MPEGTS:0,LOCAL:00:00:03.500"),
    (MAX_OFFSET_S, f"MPEGTS:{int(MAX_OFFSET_S * 90000)},LOCAL:00:00:00.000"),
])
def test_the_timestamp_map_puts_the_talks_start_at_the_offset(offset: float,
                                                              header: str) -> None:
    assert timestamp_map(offset) == "X-TIMESTAMP-MAP=" + header


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), MAX_OFFSET_S + 1, -1e12])
def test_offsets_out_of_range_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="offset"):
        clean_offset(bad)


def test_the_playlist_reads_back_with_m3u8() -> None:
    text = render_playlist(T, 7, 3, False, lambda i: f"de/abc/{i}.vtt?token=t")
    live = m3u8.loads(text)
    assert live.target_duration == 2 and live.media_sequence == 7 and not live.is_endlist
    assert [s.uri for s in live.segments] == [f"de/abc/{i}.vtt?token=t" for i in (7, 8, 9)]
    assert all(s.duration == 2 for s in live.segments)
    ended = m3u8.loads(render_playlist(T, 0, 10, True, lambda i: f"{i}.vtt"))
    assert ended.is_endlist and ended.media_sequence == 0 and len(ended.segments) == 10
