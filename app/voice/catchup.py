"""How fast a voice speaks: faster as it falls behind the speaker, within bounds.

A pure policy (no clock, no engine): the stream measures its lag and asks. An interpreter
who falls behind speaks a little faster rather than skipping, and never so fast that the
listener loses the words; once caught up, the voice is back at its own pace.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.voice.base import MAX_SPEED

# Text waiting to be spoken, in seconds of speech: about 14 characters a second at 1.0 for
# the Latin and Cyrillic scripts, 7 for Chinese and Japanese (a character a syllable or more).
CHARS_PER_S = 14.0
CJK_CHARS_PER_S = 7.0


@dataclass(frozen=True)
class CatchUp:
    """``speed(lag_s)``: 1.0 within ``slack_s`` of the speaker, then linearly faster, by
    ``max_speed`` at ``slack_s + ramp_s`` behind and beyond."""

    slack_s: float = 1.5
    ramp_s: float = 4.5
    max_speed: float = 1.5

    def __post_init__(self) -> None:
        if not (1.0 <= self.max_speed <= MAX_SPEED) or self.slack_s < 0 or self.ramp_s <= 0:
            raise ValueError("CatchUp: 1 <= max_speed <= 2, slack_s >= 0, ramp_s > 0")

    def speed(self, lag_s: float) -> float:
        """The speed for a phrase whose speech would start ``lag_s`` after it was
        committed (with what waits behind it)."""
        behind = lag_s - self.slack_s
        if not behind > 0:  # NaN too
            return 1.0
        return min(self.max_speed, 1.0 + (self.max_speed - 1.0) * behind / self.ramp_s)


def speech_s(text: str) -> float:
    """Seconds ``text`` takes to say at speed 1.0, roughly (``CHARS_PER_S``)."""
    cjk = sum(1 for ch in text if "\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff")
    return cjk / CJK_CHARS_PER_S + (len(text) - cjk) / CHARS_PER_S
