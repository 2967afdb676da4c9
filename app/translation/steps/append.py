"""The append step: what a translated update adds to its segment's committed text.

In ``"display": "append"`` mode an interpreter (a voice, the realtime API's transcript
deltas) never takes words back, so a segment's text is committed once stable
(``app.translation.commit_policy``). Which call of the policy an update makes is the final
policy's business too, so it is a step beside the others: a final closes the segment with
its caption (the committed prefix wins over a final that would diverge); a partial that is
no translation (a loop, a copy: ``app.translation.pathology``) commits nothing and leaves
the next output nothing to agree with; any other partial commits what has become stable.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.translation.commit_policy import CommitStep, SegmentCommits


def append_step(commits: SegmentCommits, tokens: Sequence[int], caption: str, final: bool,
                pathology: str | None = None) -> CommitStep | None:
    """The commit an update makes in its segment (``SegmentCommits``), if any: always one
    for a final; for a partial, what two outputs agree on past the committed text."""
    if final:
        return commits.final(caption)
    if pathology is not None:
        commits.unfit()
        return None
    return commits.partial(tokens, caption)
