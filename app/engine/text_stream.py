"""Incremental detokenization with stop strings.

Tokens carry bytes, not characters: a CJK character or an emoji can be split across two or
three tokens. Streaming must never emit half a character, and must hold back text that may
turn out to be the start of a stop string (``"\\n"`` for few-shot prompts, or a client's
``stop``).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TextStream:
    """Feed token bytes in, get safe-to-show text deltas out."""

    stop_strings: tuple[str, ...] = ()
    client_stops: tuple[str, ...] = ()  # matched only after the first non-space character
    # matched only once the answer has begun: after text that is neither empty nor a
    # lead-in ending with a colon ("Here is the translation:\n\n" goes on to the answer)
    answer_stops: tuple[str, ...] = ()
    answer_begun: Callable[[str], bool] | None = None  # default: ``answer_begun`` below
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    _text: str = ""  # all decoded text so far (possibly past a stop string)
    _emitted: int = 0  # characters of _text already handed out
    stopped: bool = False
    final_text: str | None = None

    def feed(self, data: bytes) -> str:
        """Add one token's bytes; return the newly safe text (may be empty)."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(data)
        cut = self._stop_position(self._text)
        if cut is not None:
            self.stopped = True
            self.final_text = self._text[:cut]
            return self._take(cut)
        return self._take(len(self._text) - self._held_back())

    def would_stop(self, data: bytes) -> bool:
        """Whether feeding ``data`` would end the stream at a stop string; nothing changes
        (the engine asks this of a token it has just chosen, to end a generation in the step
        that chose its stop instead of one forward pass later)."""
        if self.stopped:
            return True
        state = self._decoder.getstate()
        try:
            text = self._text + self._decoder.decode(data)
        finally:
            self._decoder.setstate(state)
        return self._stop_position(text) is not None

    def finish(self) -> str:
        """Flush at the end of generation (an incomplete character becomes U+FFFD)."""
        if not self.stopped:
            self._text += self._decoder.decode(b"", final=True)
            self.final_text = self._text
        assert self.final_text is not None
        return self._take(len(self.final_text))

    @property
    def text(self) -> str:
        return self.final_text if self.final_text is not None else self._text

    def _take(self, upto: int) -> str:
        if upto <= self._emitted:
            return ""
        delta = self._text[self._emitted : upto]
        self._emitted = upto
        return delta

    def _stop_position(self, text: str) -> int | None:
        best: int | None = None
        stops = self.stop_strings + self.client_stops + self.answer_stops
        # Only the region not yet emitted (plus a stop string's length) can hold a new match.
        start = max(0, self._emitted - max((len(s) for s in stops), default=0))
        text_begins = len(text) - len(text.lstrip())
        for stop in stops:
            since = max(start, text_begins) if stop in self.client_stops else start
            if since >= len(text):
                continue
            idx = text.find(stop, since)
            begun = self.answer_begun or answer_begun
            while idx != -1 and stop in self.answer_stops and not begun(text[:idx]):
                idx = text.find(stop, idx + 1)
            if idx != -1 and (best is None or idx < best):
                best = idx
        return best

    def _held_back(self) -> int:
        """Length of the longest tail of the text that is a proper prefix of a stop string."""
        held = 0
        for stop in self.stop_strings + self.client_stops + self.answer_stops:
            for n in range(min(len(stop) - 1, len(self._text)), 0, -1):
                if self._text.endswith(stop[:n]):
                    held = max(held, n)
                    break
        return held


def answer_begun(before: str) -> bool:
    """The text before an answer stop holds an answer, not only a lead-in ending with a
    colon."""
    text = before.strip()
    return bool(text) and not text.endswith((":", "："))
