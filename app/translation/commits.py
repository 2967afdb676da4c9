"""Committed text: what an interpreter has said and will never take back.

A connection in ``"display": "append"`` mode (and the realtime translation API) gets its
translation as committed text that only grows (``commit`` frames, API.md "Append-only
text and voices"). The commit policy decides what is stable (``app.translation``); this
module is the seam between it and whoever consumes commits: the speaker's socket, the
talk's room, a voice that speaks each committed phrase (``app.voice``, below the live
layer, hence here), the realtime API's transcript and audio deltas. A consumer registers a
``CommitListener`` on a live connection's ``CaptionPublisher`` (``commit_listeners``) and
is told of every commit, in order per (segment, language).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Commit:
    """One step of a segment's committed text in one language. ``text`` is everything
    committed for the segment so far; ``delta`` is what this step appends to the previous
    step's ``text`` (``text == previous.text + delta``, never a revision). ``final`` is the
    segment's last commit: its ``text`` is the segment's final translation."""

    segment: int
    lang: str
    text: str
    delta: str
    final: bool


class CommitListener(Protocol):
    """Told of each commit on the caption path: ``committed`` must return at once (queue
    the work) and never raise."""

    def committed(self, commit: Commit) -> None: ...
