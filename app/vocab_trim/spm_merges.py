"""The pieces SentencePiece-style merging passes through on the way to a token.

llama.cpp's tokenizer for ``tokenizer.ggml.model = llama`` (Gemma, Llama 2, Mistral) starts
from single characters and repeatedly merges the adjacent pair whose concatenation is a
vocabulary token of the highest score (ties: the leftmost pair). A token can therefore only
come out of the tokenizer if every intermediate piece of its merge path is in the vocabulary
too: a trimmed vocabulary that keeps " international" but not " intern" spells the word in
smaller pieces. Replaying the merge procedure on each kept token and keeping the pieces it
passes through closes the kept set under merging.

Why replaying a token alone is enough: in a whole text no merge crosses the boundary between
two final tokens (merged pieces are never split), so the merges inside one final token are
exactly those of its replay alone, in the same order; a trimmed vocabulary that holds the
token and its pieces offers the same best pair at every step, so it yields the same token.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping


def merge_pieces(text: str, scores: Mapping[str, float]) -> list[str]:
    """Every piece (longer than one character) that merging ``text`` creates, in the order
    the tokenizer creates them; the last is ``text`` itself when the vocabulary reaches it."""
    symbols: list[str | None] = list(text)
    if len(symbols) < 2:
        return []
    prev = list(range(-1, len(symbols) - 1))
    nxt = list(range(1, len(symbols) + 1))
    nxt[-1] = -1
    queue: list[tuple[float, int, int, str]] = []

    def push(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        joined = symbols[left] + symbols[right]  # type: ignore[operator]
        score = scores.get(joined)
        if score is not None:
            heapq.heappush(queue, (-score, left, right, joined))

    for i in range(1, len(symbols)):
        push(i - 1, i)
    created: list[str] = []
    while queue:
        _, left, right, joined = heapq.heappop(queue)
        # a pair whose sides changed since it was queued is stale
        if symbols[left] is None or symbols[right] is None or nxt[left] != right:
            continue
        if symbols[left] + symbols[right] != joined:  # type: ignore[operator]
            continue
        symbols[left] = joined
        symbols[right] = None
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        created.append(joined)
        push(prev[left], left)
        push(left, nxt[left])
    return created


def merge_closure(texts: Iterable[str], scores: Mapping[str, float]) -> set[str]:
    """The pieces that tokens ``texts`` pass through, less the texts themselves."""
    wanted = set(texts)
    needed: set[str] = set()
    for text in wanted:
        needed.update(merge_pieces(text, scores))
    return needed - wanted
