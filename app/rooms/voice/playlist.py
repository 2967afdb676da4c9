"""What an HLS player fetches of a room voice (RFC 8216): the audio media playlist and the
segments' ID3 timestamps.

A segment is packed audio (ADTS frames, ``aac``); RFC 8216 3.4 has each begin with an ID3
tag whose ``PRIV`` frame ``com.apple.streaming.transportStreamTimestamp`` is the 33-bit,
90 kHz MPEG-2 presentation time of its first frame. That time is the frame's talk second
plus the player's ``offset`` (the video's presentation time at the talk's start), the
same mapping the WebVTT segments' ``X-TIMESTAMP-MAP`` makes (``app.rooms.hls.playlist``):
the voice and the subtitles line up with each other and with the organiser's video. The tag is
written per request, so one stored segment serves every offset.

The playlist is the subtitles' in shape: while the talk runs, the newest segments (the
window ``serve --hls-window-s``, at least three); once the voice ended, all of them and
``#EXT-X-ENDLIST``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from app.rooms.hls.playlist import MPEGTS_HZ, MPEGTS_MAX
from app.rooms.hls.timeline import MIN_WINDOW_SEGMENTS
from app.rooms.voice.segments import TrackIndex

MEDIA_TYPE_SEGMENT = "audio/aac"
_OWNER = b"com.apple.streaming.transportStreamTimestamp\x00"


def _syncsafe(n: int) -> bytes:
    return bytes([(n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F])


def id3_timestamp(seconds: float) -> bytes:
    """An ID3v2.4 tag holding the HLS transport stream timestamp of ``seconds``."""
    ticks = round(seconds * MPEGTS_HZ) % (MPEGTS_MAX + 1)
    data = _OWNER + struct.pack(">Q", ticks)
    frame = b"PRIV" + _syncsafe(len(data)) + b"\x00\x00" + data
    return b"ID3\x04\x00\x00" + _syncsafe(len(frame)) + frame


def render_playlist(track: TrackIndex, segment_s: float, window_s: float,
                    uri: Callable[[int], str]) -> str:
    """The media playlist of ``track``; ``uri(i)`` names segment ``i``."""
    indices = sorted(track.durations)
    if not track.ended:
        keep = max(MIN_WINDOW_SEGMENTS, math.ceil(window_s / segment_s))
        indices = indices[-keep:]
    longest = max([segment_s, *(track.durations[i] for i in indices)])
    lines = ["#EXTM3U", "#EXT-X-VERSION:3",
             f"#EXT-X-TARGETDURATION:{math.ceil(longest)}",
             f"#EXT-X-MEDIA-SEQUENCE:{indices[0] if indices else 0}"]
    for i in indices:  # contiguous: a bound drops the oldest only
        lines += [f"#EXTINF:{track.durations[i]:.3f},", uri(i)]
    if track.ended:
        lines.append("#EXT-X-ENDLIST")
    return "\n".join(lines) + "\n"
