"""The one interface every drafter implements.

A drafter looks at the token history of the answer being generated (and optionally the
prompt tokens) and proposes up to ``k`` next tokens. It knows nothing of HTTP, sessions or
the model: the engine verifies whatever it proposes, so a bad proposal costs speed only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class DraftContext:
    """What a drafter may look at for one proposal.

    ``history`` holds the answer's tokens generated so far (not the prompt); ``prompt`` the
    prompt tokens; ``previous`` the session's previous translation (empty outside sessions).
    """

    history: Sequence[int]
    prompt: Sequence[int] = ()
    previous: Sequence[int] = field(default=())


@runtime_checkable
class Drafter(Protocol):
    """Proposes up to ``k`` tokens that may follow ``ctx.history``; ``[]`` when it has none."""

    name: str

    def propose(self, ctx: DraftContext, k: int) -> list[int]: ...
