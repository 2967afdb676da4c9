"""The context's sequences (llama.cpp's slots) and what each one caches.

A generation borrows a sequence for as long as it runs. Between generations a sequence keeps
its KV entries, so the next update of the same session, whose prompt shares everything up to
the growing source with the last one, decodes only what changed, even when other sessions
ran in between. Which sequence a new prompt gets:

* the free sequence caching the longest prefix of it (least recently used among equals, so
  the eviction order is LRU);
* if any other sequence (free or running) caches a longer prefix (typically the few-shot
  preamble every prompt starts with), that prefix is copied in with ``llama_memory_seq_cp``:
  in a unified KV cache the copy shares cells, it computes nothing.

Keepers (``LlamaRuntime.n_keep`` sequences numbered after the slots) run nothing: a
generation whose prompt recurs (``GenerationRequest.keep_prompt``: a pathological final's
retry, whose stronger prompt carries examples no ordinary prompt has) leaves its prompt's KV
in one (least recently used first) when it ends, and every later prompt may copy from a
keeper as from any sequence. Without them, the ordinary updates that follow a retry on its
sequence cut those examples away, and the next retry decoded them again (39 rows for
en->de's few-shot examples).

A session whose KV was evicted simply re-prefills: correctness never depends on the cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.engine.runtime import KEEPER_CELLS, LlamaRuntime
from app.prefix import common_prefix

log = logging.getLogger("livetrans.kv_slots")

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
    kept_prompts: int = 0  # prompts left in a keeper sequence for later ones to copy


class KvSlots:
    """The pool of sequences of one context."""

    def __init__(self, rt: LlamaRuntime, share_prefixes: bool = True) -> None:
        self.rt = rt
        self.share_prefixes = share_prefixes
        self.slots = [SeqKV(rt, i) for i in range(rt.n_seq)]
        self.keepers = [SeqKV(rt, rt.n_seq + i) for i in range(rt.n_keep)] \
            if share_prefixes else []
        self.stats = SlotStats()

    @property
    def free(self) -> int:
        return sum(not s.busy for s in self.slots)

    @property
    def busy(self) -> int:
        return len(self.slots) - self.free

    def acquire(self, tokens: Sequence[int]) -> SeqKV | None:
        """A free sequence for a prompt starting with ``tokens`` (None when all are busy)."""
        free = [s for s in self.slots if not s.busy]
        if not free:
            return None
        best = max(free, key=lambda s: (s.common_prefix(tokens), -s.last_used))
        have = best.common_prefix(tokens)
        if self.share_prefixes:
            donor = max([*self.slots, *self.keepers], key=lambda s: s.common_prefix(tokens))
            n = donor.common_prefix(tokens)
            if donor is not best and n >= have + MIN_PREFIX_COPY:
                self.rt.seq_copy(donor.seq_id, best.seq_id, n)
                best.cached = list(tokens[:n])
                self.stats.copied_tokens += n - have
                have = n
        best.busy = True
        return best

    def release(self, kv: SeqKV, keep: int = 0) -> None:
        """``kv`` is free again; with ``keep``, its first ``keep`` positions (a recurring
        prompt's) are first copied into a keeper (``keep_prefix``)."""
        if keep:
            self.keep_prefix(kv, keep)
        kv.busy = False
        kv.last_used = time.monotonic()

    def keep_prefix(self, kv: SeqKV, n: int) -> None:
        """Let a keeper hold ``kv``'s first ``n`` positions (at most ``KEEPER_CELLS``), unless
        one holds them already. Shared cells: nothing is computed. Should the copy fail, the
        keeper is emptied (correctness never depends on the cache) and the error is not
        this generation's: it has its answer."""
        tokens = kv.cached[:min(n, KEEPER_CELLS)]
        if not self.keepers or len(tokens) < MIN_PREFIX_COPY:
            return
        now = time.monotonic()
        for keeper in self.keepers:
            if keeper.common_prefix(tokens) == len(tokens):
                keeper.last_used = now
                return
        keeper = min(self.keepers, key=lambda s: s.last_used)
        try:
            self.rt.seq_copy(kv.seq_id, keeper.seq_id, len(tokens))
        except Exception:  # noqa: BLE001 - a cache that failed to copy is one to forget
            log.warning("keeping a prompt's KV failed; the keeper is emptied", exc_info=True)
            keeper.cached.clear()  # never a donor now, whatever its cells still hold
            return
        keeper.cached = list(tokens)
        keeper.last_used = now
        self.stats.kept_prompts += 1

    def clear(self) -> None:
        """Forget every sequence's cache (after a failed decode, or on request)."""
        self.rt.clear()
        for s in [*self.slots, *self.keepers]:
            s.cached.clear()
