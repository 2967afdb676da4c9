"""The sequence pool's bookkeeping alone (no model): which sequence a prompt gets, which
prefix is copied from where, and what the keeper sequences hold. The copies' effect on
outputs is checked on the real model in ``test_scheduler.py``."""

from __future__ import annotations

import pytest

from app.engine.kv_slots import MIN_PREFIX_COPY, KvSlots
from app.engine.runtime import KEEPER_CELLS


class RecordingRuntime:
    """The cache edits ``KvSlots`` makes, recorded; ``fail_copy`` makes a copy raise."""

    def __init__(self, n_seq: int, n_keep: int = 2) -> None:
        self.n_seq, self.n_keep = n_seq, n_keep
        self.copies: list[tuple[int, int, int]] = []
        self.fail_copy = False

    def truncate(self, pos: int, seq: int = 0) -> None:
        pass

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        if self.fail_copy:
            raise RuntimeError("llama_memory_seq_cp failed")
        self.copies.append((src, dst, n))

    def clear(self) -> None:
        pass


EXAMPLES = list(range(100, 190))  # a retry prompt's examples: what every retry shares


def _run(slots: KvSlots, prompt: list[int], keep: bool = False) -> int:
    """One generation on ``prompt``: its sequence, cached it, then released."""
    kv = slots.acquire(prompt)
    assert kv is not None
    kv.cached = list(prompt) + [7, 7]  # the prompt and two generated tokens
    slots.release(kv, keep=len(prompt) if keep else 0)
    return kv.seq_id


def test_a_recurring_prompt_is_copied_from_its_keeper_after_its_sequence_moved_on() -> None:
    rt = RecordingRuntime(n_seq=1)
    slots = KvSlots(rt)  # type: ignore[arg-type]
    first_retry = [*EXAMPLES, 1, 2, 3]
    _run(slots, first_retry, keep=True)
    assert rt.copies == [(0, 1, len(first_retry))]  # into the first keeper, prompt only
    assert slots.stats.kept_prompts == 1
    _run(slots, [*EXAMPLES[:30], 9, 9, 9])  # an ordinary update cuts the sequence back
    assert slots.slots[0].cached[:31] != first_retry[:31]
    rt.copies.clear()
    second_retry = [*EXAMPLES, 4, 5]
    kv = slots.acquire(second_retry)
    assert kv is slots.slots[0]
    assert rt.copies == [(1, 0, len(EXAMPLES))]  # the shared examples, from the keeper
    assert kv.common_prefix(second_retry) == len(EXAMPLES)


def test_keepers_run_nothing_and_replace_the_least_recently_used() -> None:
    rt = RecordingRuntime(n_seq=1, n_keep=2)
    slots = KvSlots(rt)  # type: ignore[arg-type]
    prompts = [[lang] * 20 + [i] for i, lang in enumerate((1, 2, 3))]
    for p in prompts:
        assert _run(slots, p, keep=True) == 0  # always the one slot, never a keeper
    held = sorted(tuple(k.cached) for k in slots.keepers)
    assert held == sorted([tuple(prompts[1]), tuple(prompts[2])])  # the oldest went
    assert slots.free == 1


def test_a_prompt_a_keeper_holds_already_is_not_copied_again() -> None:
    rt = RecordingRuntime(n_seq=2)
    slots = KvSlots(rt)  # type: ignore[arg-type]
    prompt = [*EXAMPLES, 1]
    _run(slots, prompt, keep=True)
    rt.copies.clear()
    kv = slots.acquire(prompt)
    kv.cached = list(prompt)
    slots.release(kv, keep=len(prompt))
    assert all(dst < rt.n_seq for _, dst, _ in rt.copies)  # no copy into a keeper
    assert slots.stats.kept_prompts == 1


@pytest.mark.parametrize("length", [MIN_PREFIX_COPY - 1, KEEPER_CELLS + 40])
def test_what_a_keeper_takes_is_bounded(length: int) -> None:
    rt = RecordingRuntime(n_seq=1)
    slots = KvSlots(rt)  # type: ignore[arg-type]
    _run(slots, list(range(length)), keep=True)
    kept = max(len(k.cached) for k in slots.keepers)
    assert kept == (0 if length < MIN_PREFIX_COPY else KEEPER_CELLS)


def test_a_failed_keeper_copy_empties_the_keeper_and_frees_the_sequence() -> None:
    rt = RecordingRuntime(n_seq=1, n_keep=1)
    slots = KvSlots(rt)  # type: ignore[arg-type]
    _run(slots, [*EXAMPLES, 1], keep=True)
    rt.fail_copy = True
    _run(slots, [*EXAMPLES[:50], 8, 8], keep=True)  # its copy into the keeper fails
    assert slots.free == 1
    assert slots.keepers[0].cached == []  # no donor now: its cells are not trusted
    assert slots.stats.kept_prompts == 1


def test_without_prefix_sharing_there_are_no_keepers_and_clear_empties_them() -> None:
    rt = RecordingRuntime(n_seq=1)
    assert KvSlots(rt, share_prefixes=False).keepers == []  # type: ignore[arg-type]
    slots = KvSlots(rt)  # type: ignore[arg-type]
    _run(slots, [*EXAMPLES, 1], keep=True)
    slots.clear()
    assert all(not k.cached for k in slots.keepers)
