"""The append-only commit policy: which words of a re-translated segment are stable.

Re-translation rewrites a segment's translation on every update; an interpreter (a voice, a
realtime API's transcript deltas, a client that appends) cannot take words back. So in
``"display": "append"`` mode a segment's text is *committed* once it is stable, and never
revised: later updates and the final are decoded with the committed tokens forced as the
start of the answer (``app.translation.translator``, ``forced``), so the rest still goes
through SSBD's draft verification and the final starts with everything committed.

Stable means local agreement (LocalAgreement-2, as WhisperLiveKit and SimulStreaming commit
re-decoded text): the longest token prefix on which the previous and the current output of
the segment agree, cut back so that

* it stays beyond the display mask: never more than the viewer is shown (all but the last
  ``mask_k`` tokens of a partial), so a commit never says what a caption still hides;
* it ends at a word boundary on which both outputs agree: the token after the cut is shared
  and begins a word (a leading space; for targets written without spaces, any token that
  starts a whole character), so "Hund" is never committed while "Hundes" may follow;
* its text is whole UTF-8 characters.

The text of a commit is the tokens' text without leading whitespace, and it ends before the
space that begins the next word: each step's ``delta`` carries its own leading space
(" läuft"), so a client concatenating deltas gets the segment's text and must not insert
spaces of its own (OpenAI: "clients should not insert unconditional spaces between
deltas"). The policy is pure (no model: a token's bytes come from a function), one
``SegmentCommits`` per (segment, language); which of its calls an update makes (``partial``,
``unfit``, ``final``) is the update's append step (``app.translation.steps.append``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.prefix import common_prefix
from app.translation.display import Unit

TokenBytes = Callable[[int], bytes]

_SPACE = frozenset(b" \t\n\r")


def starts_word(piece: bytes, unit: Unit) -> bool:
    """Whether a token whose bytes are ``piece`` begins a new word (so a commit may end
    right before it). Words: a leading space. Characters (ja, zh, th, ...): a token that
    starts a whole UTF-8 character, not a continuation byte of the one before."""
    if not piece:
        return False
    if piece[0] in _SPACE:
        return True
    return unit == "char" and (piece[0] & 0xC0) != 0x80


def token_text(tokens: Sequence[int], token_bytes: TokenBytes) -> str | None:
    """The text of ``tokens`` as the engine streams it (their bytes, decoded), or None when
    they end inside a character."""
    try:
        return b"".join(token_bytes(t) for t in tokens).decode("utf-8")
    except UnicodeDecodeError:
        return None


def stable_length(previous: Sequence[int], current: Sequence[int], committed: int,
                  mask_k: int, boundary: Callable[[int], bool]) -> int:
    """How many leading tokens of ``current`` may be committed (at least ``committed``).

    ``boundary(i)`` says whether ``current[i]`` begins a word. The cut ``n`` lies strictly
    inside the prefix both outputs agree on (so the token after it, which begins a word,
    is agreed on too) and within what the display mask shows (``n <= len(current) -
    mask_k``); the largest such ``n`` past ``committed`` wins, else ``committed``.
    """
    agreed = common_prefix(list(previous), list(current))
    limit = min(agreed - 1, len(current) - max(mask_k, 0))
    for n in range(limit, committed, -1):
        if boundary(n):
            return n
    return committed


@dataclass(frozen=True)
class CommitStep:
    """What one update commits: ``text`` is everything committed for the segment so far,
    ``delta`` what this step appends (``text == previous text + delta``); ``final`` is the
    segment's last step, whose ``text`` is the final caption."""

    text: str
    delta: str
    final: bool = False


def final_with_prefix(committed: str, final: str, unit: Unit = "word") -> str:
    """The final caption of a segment that committed ``committed``: ``final`` when it starts
    with it (forced decoding makes it so), else the committed text wins, continued by what
    ``final`` says past the committed text's length (from a word boundary on). Committed
    words are never revised, even when the final would have said something else."""
    final = final.strip()
    if not committed or final.startswith(committed):
        return final or committed
    tail = final[len(committed):] if len(final) > len(committed) else ""
    if unit == "word" and tail and not tail[0].isspace():
        cut = tail.find(" ")
        tail = tail[cut:] if cut >= 0 else ""
    return committed + tail.rstrip()


@dataclass
class SegmentCommits:
    """One segment's committed text in one language, update by update.

    ``tokens`` are the committed tokens (the prefix every later update of the segment is
    decoded with, forced); ``text`` their text. ``partial`` takes an output (its tokens, the
    forced prefix included) and returns the step it commits, if any; ``final`` takes the
    final caption and returns the segment's last step (always one: it closes the segment
    for whoever listens, even when it adds nothing).
    """

    token_bytes: TokenBytes
    unit: Unit = "word"
    mask_k: int = 3
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    previous: list[int] | None = None
    closed: bool = False

    def forced(self) -> list[int]:
        """The tokens the next update of the segment must start its answer with."""
        return list(self.tokens)

    def partial(self, output: Sequence[int], caption: str | None = None) -> CommitStep | None:
        """A partial's output: commit what it and the previous output agree on, if that
        extends the committed text at a word boundary (and, given the ``caption`` the
        viewer is shown, is a prefix of it). None when nothing new is stable."""
        if self.closed:
            return None
        current = list(output)
        previous, self.previous = self.previous, current
        if previous is None or current[: len(self.tokens)] != self.tokens:
            return None  # the first output of the segment, or one not decoded with the prefix

        def boundary(i: int) -> bool:
            return starts_word(self.token_bytes(current[i]), self.unit)

        n = stable_length(previous, current, len(self.tokens), self.mask_k, boundary)
        if n <= len(self.tokens):
            return None
        raw = token_text(current[:n], self.token_bytes)
        if raw is None or not raw.strip() or raw != raw.rstrip():
            return None
        text = raw.lstrip()
        if not text.startswith(self.text) or (caption is not None
                                              and not caption.startswith(text)):
            return None
        delta = text[len(self.text):]
        self.tokens, self.text = current[:n], text
        return CommitStep(text, delta)

    def unfit(self) -> None:
        """A partial that is no translation (a loop, a copy of the source: ``app.translation.
        pathology``) commits nothing, and the next output has nothing to agree with."""
        self.previous = None

    def final(self, caption: str) -> CommitStep:
        """The final caption (already ``final_with_prefix``-checked by the caller, or
        checked here): the segment's last step, whose text is the caption."""
        text = final_with_prefix(self.text, caption, self.unit)
        delta = text[len(self.text):]
        self.text, self.closed = text, True
        return CommitStep(text, delta, final=True)
