"""Display policies: from a segment's successive translations to what the viewer sees.

Re-translation rewrites its output on every update, so a caption that shows each raw output
flickers. A display policy decides, per update, how much of the current translation to
show. It is pure logic (no model): one policy object per segment, fed each update's output
in order with ``show``; it keeps whatever state it needs and forgets it at ``reset()`` (a new
segment) and after a final (which closes the segment).

* ``mask-k`` (``MaskK``): a partial hides its last ``k`` tokens (the server's display-only
  mask-k, ``app.translation.steps.display.masked_tokens``); the final shows everything.
  Cheap and stateless, but what it shows may still be retracted: the tokens before the mask
  change too.
* ``stable`` (``Stable``): a partial shows the longest prefix, in words (characters for
  scripts written without spaces), on which the two latest outputs agree, and never less
  than it showed before in the segment: within a segment a viewer never sees a shown word
  taken back. If the two latest outputs agree on less than is shown, or on something else,
  the old display stays. The final shows the final translation whole (it may rewrite the
  caption once, as a whole, which is what a faithful final needs).

``display_policy(mode, k)`` builds one; the server would keep one per open segment (see the
module's users in ``eval/display_eval.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.prefix import common_prefix

Unit = Literal["word", "char"]
Detokenize = Callable[[Sequence[int]], str]

DISPLAY_MODES = ("mask-k", "stable")

# Targets written without spaces between words: a "word" there is a whole clause, so the
# stable prefix and the mask count characters instead.
CHAR_LANGS = frozenset({"zh", "ja", "yue", "th", "lo", "km", "my", "bo"})


def display_unit(lang: str | None) -> Unit:
    """``char`` for targets written without spaces (zh, ja, th, ...), else ``word``."""
    base = (lang or "").lower().replace("_", "-").split("-")[0]
    return "char" if base in CHAR_LANGS else "word"


def split_units(text: str, unit: Unit) -> list[str]:
    """Words (whitespace-separated) or characters (whitespace dropped) of ``text``."""
    if unit == "word":
        return text.split()
    return [ch for ch in text if not ch.isspace()]


def join_units(text: str, unit: Unit, n: int) -> str:
    """The first ``n`` units of ``text`` as the original text spells them (its spacing
    kept for characters; single spaces between words)."""
    if n <= 0:
        return ""
    if unit == "word":
        return " ".join(text.split()[:n])
    seen = 0
    for i, ch in enumerate(text):
        if not ch.isspace():
            seen += 1
            if seen == n:
                return text[: i + 1].strip()
    return text.strip()


@dataclass(frozen=True)
class Translation:
    """One update's output as a display policy sees it: the text, whether it is the
    segment's final, and the tokens when the caller has them (mask-k counts tokens)."""

    text: str
    final: bool = False
    tokens: Sequence[int] | None = None


class DisplayPolicy(ABC):
    """What the viewer sees of one segment, update by update (state lives here)."""

    mode: str

    @abstractmethod
    def show(self, out: Translation) -> str:
        """The caption to display for this update; a final also ends the segment."""

    def reset(self) -> None:  # noqa: B027 - stateless policies have nothing to forget
        """Forget the segment: the next ``show`` starts a new one."""

    def show_all(self, outputs: Sequence[Translation]) -> list[str]:
        """Displays of one whole segment, from a fresh state (for evaluation)."""
        self.reset()
        shown = [self.show(o) for o in outputs]
        self.reset()
        return shown


class MaskK(DisplayPolicy):
    """Display-only mask-k: a partial hides its last ``k`` tokens, a final hides nothing.

    With tokens and a ``detokenize`` this is exactly the server's display (the masked token
    list detokenized, stripped). Without tokens (text only, e.g. records from a remote
    server) it hides the last ``k`` units (words, or characters) instead, the closest
    text-level equivalent.
    """

    mode = "mask-k"

    def __init__(self, k: int, unit: Unit = "word", detokenize: Detokenize | None = None) -> None:
        if k < 0:
            raise ValueError("k must be >= 0")
        self.k = k
        self.unit = unit
        self.detokenize = detokenize

    def shown_tokens(self, tokens: Sequence[int], final: bool) -> list[int]:
        """The tokens the viewer sees (same rule as
        ``app.translation.steps.display.masked_tokens``)."""
        if final or self.k <= 0:
            return list(tokens)
        return list(tokens[: max(0, len(tokens) - self.k)])

    def show(self, out: Translation) -> str:
        if out.final or self.k <= 0:
            return out.text.strip()
        if out.tokens is not None and self.detokenize is not None:
            return self.detokenize(self.shown_tokens(out.tokens, False)).strip()
        n = len(split_units(out.text, self.unit))
        return join_units(out.text, self.unit, n - self.k)


class Stable(DisplayPolicy):
    """Show only what two consecutive outputs agree on, and never take a shown unit back.

    State per segment: the previous output's units and the units on display. A partial
    extends the display to the common prefix of the previous and current outputs when that
    prefix starts with what is shown and is longer; otherwise the display stays as it was
    (it may then lag until outputs agree again, or until the final). The first output of a
    segment has nothing to agree with and shows nothing. The final is shown whole.

    Units are compared whole, punctuation included ("Haus." is not "Haus,"). Holding back an
    agreed unit that closes an output with punctuation was tried and changed nothing that
    matters on FLORES de/ja/zh (display NE within 0.02, first display within 0.05 s): the
    engine leaves a draft's final punctuation unbiased, so partials rarely agree on it.
    """

    mode = "stable"

    def __init__(self, unit: Unit = "word") -> None:
        self.unit = unit
        self.reset()

    def reset(self) -> None:
        self._previous: list[str] | None = None
        self._shown: list[str] = []
        self._shown_text = ""

    def show(self, out: Translation) -> str:
        if out.final:
            text = out.text.strip()
            self.reset()
            return text
        current = split_units(out.text, self.unit)
        if self._previous is not None:
            agreed = common_prefix(self._previous, current)
            shown = len(self._shown)
            if agreed > shown and current[:shown] == self._shown:
                self._shown = current[:agreed]
                self._shown_text = join_units(out.text, self.unit, agreed)
        self._previous = current
        return self._shown_text


def display_policy(mode: str, k: int = 3, *, unit: Unit = "word",
                   detokenize: Detokenize | None = None) -> DisplayPolicy:
    """A fresh policy (one segment's state) for ``mode``: ``mask-k`` (with ``k``) or
    ``stable``. ``unit`` is ``display_unit(target_lang)``; ``detokenize`` lets mask-k count
    tokens as the server does."""
    if mode == "mask-k":
        return MaskK(k, unit, detokenize)
    if mode == "stable":
        return Stable(unit)
    raise ValueError(f"unknown display mode {mode!r} (choose one of {', '.join(DISPLAY_MODES)})")
