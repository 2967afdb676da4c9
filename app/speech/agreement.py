"""LocalAgreement: commit a streaming recogniser's words only when consecutive decodes agree.

Whisper re-decodes the growing audio buffer every step, and the end of each hypothesis
changes as more audio arrives. LocalAgreement-n (Polák et al. 2022; the policy of
whisper_streaming) commits the longest common prefix of the last n hypotheses: a word two
decodes of different audio lengths agree on rarely changes again. Committed words are
final for their segment; the rest is the uncommitted tail, shown as a partial.

Pure logic over word lists (no audio, no model), so the policy is testable on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NORM = re.compile(r"[^\w']+")


@dataclass(frozen=True)
class Word:
    """A recognised word with its start and end in seconds (of the segment's audio)."""

    text: str
    start: float
    end: float


def _same(a: Word, b: Word) -> bool:
    """Two decodes' words agree when their text does (case and punctuation aside)."""
    return _NORM.sub("", a.text.lower()) == _NORM.sub("", b.text.lower())


class LocalAgreement:
    """LocalAgreement-2 over whole-segment hypotheses."""

    def __init__(self) -> None:
        self.committed: list[Word] = []
        self.previous: list[Word] = []  # the last hypothesis past the committed words

    def _past_committed(self, words: list[Word]) -> list[Word]:
        """``words`` without the ones already committed (matched by position and text)."""
        n = len(self.committed)
        if len(words) >= n and all(_same(a, b) for a, b in zip(words, self.committed,
                                                              strict=False)):
            return words[n:]
        # the new decode re-segmented the committed part: skip by time instead
        end = self.committed[-1].end if self.committed else 0.0
        return [w for w in words if w.start >= end - 0.05]

    def update(self, words: list[Word]) -> list[Word]:
        """A new hypothesis of the whole segment; returns the words it newly commits."""
        fresh = self._past_committed(words)
        agreed: list[Word] = []
        for old, new in zip(self.previous, fresh, strict=False):
            if not _same(old, new):
                break
            agreed.append(new)
        self.committed += agreed
        self.previous = fresh[len(agreed):]
        return agreed

    @property
    def tail(self) -> list[Word]:
        """The uncommitted words of the latest hypothesis."""
        return self.previous

    def finish(self, words: list[Word] | None = None) -> list[Word]:
        """The segment ends: the last hypothesis (``words``, else the latest) is taken
        whole; returns the words committed now."""
        rest = self._past_committed(words) if words is not None else self.previous
        self.committed += rest
        self.previous = []
        return rest

    def text(self, words: list[Word] | None = None) -> str:
        return " ".join(w.text.strip() for w in (self.committed if words is None else words)
                        if w.text.strip())
