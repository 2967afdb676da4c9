"""What an HLS player fetches of a talk's subtitles (RFC 8216; docs/captions-out-hls.md):
the media playlist and the WebVTT segments as text, and the timestamp map that puts them on
the organiser's video. Which segments exist and which cues each holds is ``timeline``'s.

**The timestamp map.** Every segment starts with ``X-TIMESTAMP-MAP`` mapping the talk's
second 0 onto the video's presentation clock (90 kHz MPEG-TS ticks): ``offset`` seconds
(``serve --hls-offset-s``, or ``offset=`` on the playlist) is the video's presentation time
at the talk's start; a negative one says the talk started before the video's time 0. The
room voice's segments use the same mapping (``app.rooms.voice.playlist``), so voice,
subtitles and video line up.

Each segment ends with a blank line: readers that concatenate the segments into one
WebVTT stream (``ffmpeg``'s HLS demuxer) then see each next ``WEBVTT`` header as a block of
its own, which they skip, rather than as more text of the previous cue.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

import m3u8
import webvtt

from app.rooms.hls.timeline import Cue, HlsTiming

MPEGTS_HZ = 90_000
MPEGTS_MAX = 2 ** 33 - 1  # MPEG-TS timestamps have 33 bits
MAX_OFFSET_S = 86_400.0  # a day: far inside the 33-bit clock (26.5 hours)
MEDIA_TYPE_PLAYLIST = "application/vnd.apple.mpegurl"
MEDIA_TYPE_SEGMENT = "text/vtt; charset=utf-8"


def clean_offset(value: float) -> float:
    """An offset in seconds, to the millisecond, within ``MAX_OFFSET_S``; ``ValueError``
    for one that is not a finite number in range."""
    offset = float(value)
    if not math.isfinite(offset) or abs(offset) > MAX_OFFSET_S:
        raise ValueError(f"offset must be a number of seconds from -{MAX_OFFSET_S:g} to "
                         f"{MAX_OFFSET_S:g}")
    return round(offset, 3)


def timestamp_map(offset_s: float) -> str:
    """The ``X-TIMESTAMP-MAP`` line: the talk's second 0 at the video's presentation time
    ``offset_s``. A negative offset maps the talk's second ``-offset_s`` onto time 0 (a
    WebVTT timestamp cannot be negative, nor can an MPEG-TS one)."""
    offset = clean_offset(offset_s)
    if offset >= 0:
        ticks = min(round(offset * MPEGTS_HZ), MPEGTS_MAX)
        return f"X-TIMESTAMP-MAP=MPEGTS:{ticks},LOCAL:{_timestamp(0)}"
    return f"X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:{_timestamp(round(-offset * 1000))}"


def _timestamp(ms: int) -> str:
    hours, rest = divmod(max(int(ms), 0), 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}"


def render_segment(cues: list[Cue], offset_s: float) -> str:
    """One WebVTT segment: the timestamp map, the cues (identified by their caption
    segment, text escaped as in the transcript download) and a closing blank line."""
    captions = [webvtt.Caption(_timestamp(cue.start_ms), _timestamp(cue.end_ms),
                               html.escape(cue.text, quote=False), identifier=str(cue.segment))
                for cue in cues]
    content = webvtt.WebVTT(captions=captions, metadata=[timestamp_map(offset_s)]).content
    return content + "\n"


def render_playlist(timing: HlsTiming, first: int, count: int, ended: bool,
                    uri: Callable[[int], str]) -> str:
    """The media playlist of segments ``first .. first+count-1`` (``uri(i)`` names each),
    ended with ``#EXT-X-ENDLIST`` when the talk is over."""
    playlist = m3u8.M3U8()
    playlist.version = 3
    playlist.target_duration = timing.segment_s
    playlist.media_sequence = first
    for index in range(first, first + count):
        playlist.add_segment(m3u8.Segment(uri=uri(index), duration=timing.segment_s))
    playlist.is_endlist = ended
    return playlist.dumps()
