"""The context's sequences (llama.cpp's slots) and what each one caches.

A generation borrows a sequence for as long as it runs. Between generations a sequence keeps
its KV entries, so the next update of the same session, whose prompt shares everything up to
the growing source with the last one, decodes only what changed, even when other sessions
ran in between. Which sequence a new prompt gets:

* the free sequence caching the longest prefix of it (least recently used among equals, so
  the eviction order is LRU);
* if any other sequence (free or running) caches a longer prefix (typically the few-shot
  preamble every prompt starts with), that prefix is copied in with ``llama_memory_seq_cp``:
  in a unified KV cache the copy shares cells, it computes nothing;
* a *one-off* prompt that no later prompt extends (a final's retry: its prompt shares the
  few-shot preamble with its session's, then differs) takes the least recently used free
  sequence and copies its prefix in, instead of the session's own sequence: taking that
  one made the session's next update decode its whole context again (100-300 rows).

A session whose KV was evicted simply re-prefills: correctness never depends on the cache.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.engine.runtime import LlamaRuntime
from app.prefix import common_prefix

# Copying a prefix shorter than this saves less than the bookkeeping costs.
MIN_PREFIX_COPY = 8


@dataclass
class SeqKV:
    """One llama.cpp sequence and the tokens whose KV entries it holds (a mirror)."""

    rt: LlamaRuntime
    seq_id: int
    cached: list[int] = field(default_factory=list)
    busy: bool = False
    last_used: float = 0.0

    def common_prefix(self, tokens: Sequence[int]) -> int:
        return common_prefix(self.cached, tokens)

    def truncate(self, pos: int) -> None:
        """Forget KV entries from ``pos`` on, so decoding can continue from there."""
        if pos < len(self.cached):
            self.rt.truncate(pos, self.seq_id)
            del self.cached[pos:]

    def forget(self) -> None:
        """Drop every KV entry, whatever the mirror says: after a failure the cache and
        its mirror may disagree, and ``truncate`` trusts the mirror. Emptying a whole
        sequence is the one removal a recurrent model also allows."""
        self.rt.truncate(0, self.seq_id)
        self.cached.clear()


@dataclass
class SlotStats:
    copied_tokens: int = 0  # prompt tokens taken from another sequence instead of decoded


class KvSlots:
    """The pool of sequences of one context."""

    def __init__(self, rt: LlamaRuntime, share_prefixes: bool = True) -> None:
        self.rt = rt
        self.share_prefixes = share_prefixes
        self.slots = [SeqKV(rt, i) for i in range(rt.n_seq)]
        self.stats = SlotStats()

    @property
    def free(self) -> int:
        return sum(not s.busy for s in self.slots)

    @property
    def busy(self) -> int:
        return len(self.slots) - self.free

    def acquire(self, tokens: Sequence[int], one_off: bool = False) -> SeqKV | None:
        """A free sequence for a prompt starting with ``tokens`` (None when all are busy);
        ``one_off``: the least recently used one, whatever it caches."""
        free = [s for s in self.slots if not s.busy]
        if not free:
            return None
        if one_off:
            best = min(free, key=lambda s: s.last_used)
        else:
            best = max(free, key=lambda s: (s.common_prefix(tokens), -s.last_used))
        have = best.common_prefix(tokens)
        if self.share_prefixes:
            donor = max(self.slots, key=lambda s: s.common_prefix(tokens))
            n = donor.common_prefix(tokens)
            if donor is not best and n >= have + MIN_PREFIX_COPY:
                self.rt.seq_copy(donor.seq_id, best.seq_id, n)
                best.cached = list(tokens[:n])
                self.stats.copied_tokens += n - have
                have = n
        best.busy = True
        return best

    def release(self, kv: SeqKV) -> None:
        kv.busy = False
        kv.last_used = time.monotonic()

    def clear(self) -> None:
        """Forget every sequence's cache (after a failed decode, or on request)."""
        self.rt.clear()
        for s in self.slots:
            s.cached.clear()
