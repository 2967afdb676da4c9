"""The HLS subtitle renditions of a talk: segments, window, offset."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from app.settings.base import SubsystemSettings


class HlsSettings(SubsystemSettings):
    """The HLS subtitle renditions of a talk."""

    group: ClassVar[str] = "HLS options"
    flat_prefix: ClassVar[str] = "hls_"

    segment_s: int = Field(
        4, ge=1, le=60, description="seconds of captions per segment of the HLS subtitle "
                                    "renditions (their EXT-X-TARGETDURATION)")
    window_s: int = Field(
        60, ge=1, le=3600, description="seconds of segments a running talk's HLS subtitle "
                                       "playlist lists (at least three segments); an ended "
                                       "talk's lists all of them")
    offset_s: float = Field(
        0.0, ge=-86400, le=86400, allow_inf_nan=False,
        description="the video's presentation time, in seconds, at the talk's start: where "
                    "the HLS subtitle cues (timed from the talk's start) line up with the "
                    "organiser's stream (X-TIMESTAMP-MAP); offset= on a playlist overrides it")
