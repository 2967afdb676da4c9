"""Append-only transcript deltas out of per-segment text.

The protocol's transcripts are one stream of deltas that a client concatenates as they
come ("clients should not insert unconditional spaces between deltas"). The live
connection's text is per segment: a segment's committed text grows (``commit`` frames),
or, for the source and the fallback below, arrives whole with its final. This turns the
segments' growth into one stream: only what extends a segment is sent, never a revision,
and a new segment starts with a space in languages written with spaces.
"""

from __future__ import annotations

from app.translation.display import display_unit

MAX_SEGMENTS = 64  # segments remembered (a commit names an earlier one only shortly)


class TranscriptStream:
    """One transcript (source or translation) in one language."""

    def __init__(self, lang: str | None) -> None:
        self.spaced = display_unit(lang) == "word"
        self.texts: dict[int, str] = {}  # each segment's text sent so far
        self.sent_any = False

    def extend(self, segment: int, text: str) -> str:
        """The delta that takes ``segment`` to ``text`` ('' when nothing is new, or when
        ``text`` would revise what was sent: sent text is never taken back)."""
        before = self.texts.get(segment)
        if before is None:
            text = text.lstrip()
            if not text:
                return ""
            if segment < max(self.texts, default=-1):
                return ""  # an old segment's late text: it would land out of order
            self.texts[segment] = text
            while len(self.texts) > MAX_SEGMENTS:
                del self.texts[min(self.texts)]
            joined = " " + text if self.sent_any and self.spaced else text
            self.sent_any = True
            return joined
        if not text.startswith(before) or len(text) == len(before):
            return ""
        self.texts[segment] = text
        return text[len(before):]
