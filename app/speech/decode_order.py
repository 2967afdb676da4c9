"""Which speaker's decode runs next on the recogniser's one thread: a pure policy.

Each audio speaker has at most one *turn* waiting (``app.live.audio`` hands the
recogniser the audio that arrived while its last turn ran). Before choosing, the
recogniser has every waiting stream's VAD say which decode it needs
(``StreamingWhisper.next_decode``, a few milliseconds); then:

1. **Urgent first**: a decode a final waits for (an endpoint, a pause, a segment at its
   length limit, a speaker's last audio) goes before any partial decode, oldest first. A
   speaker's final is never held up by other speakers' partials.
2. **Partials in turn**: among partial decodes, the oldest waiting turn first (round
   robin: a speaker whose partial just ran waits behind the others).
3. **Thinned when behind**: when a turn has waited longer than ``behind_s``, partial
   decodes are skipped for everyone (the turn ends without a decode; its audio stays in
   the stream's buffer and the next turn hears it) until the recogniser has caught up.
   Finals are never skipped.

No thread, no clock of its own: ``app.speech.service`` drives it, and the tests drive it
with fake streams (``tests/app/speech/test_decode_order.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

BEHIND_S = 2.0  # a turn waiting this long means the recogniser is behind: thin partials


class PlannedDecode(Protocol):
    kind: str

    @property
    def urgent(self) -> bool: ...


class Waiting(Protocol):
    """A turn as the policy sees it: when it was asked for, and its next decode."""

    enqueued_at: float
    decode: PlannedDecode | None


@dataclass(frozen=True)
class Choice:
    """The next turn to serve, and whether to decode (False: thin it, end it as it is)."""

    turn: Waiting
    decode: bool


def choose(turns: Sequence[Waiting], now: float, behind_s: float = BEHIND_S) -> Choice | None:
    """The next turn to serve among ``turns`` with a decode planned (None: nothing to do)."""
    planned = [t for t in turns if t.decode is not None]
    if not planned:
        return None
    urgent = [t for t in planned if t.decode is not None and t.decode.urgent]
    if urgent:
        return Choice(min(urgent, key=lambda t: t.enqueued_at), decode=True)
    oldest = min(planned, key=lambda t: t.enqueued_at)
    behind = any(now - t.enqueued_at > behind_s for t in turns)
    return Choice(oldest, decode=not behind)
