"""Which sequence a prompt gets (``app.engine.kv_slots``): the one caching most of it, or
for a one-off prompt (a final's retry) the least recently used, its prefix copied in."""

from __future__ import annotations

from app.engine.kv_slots import KvSlots
from tests.app.engine.test_policy import FakeRuntime

PREAMBLE = list(range(100, 140))  # the few-shot examples every prompt starts with


def _pool() -> tuple[KvSlots, FakeRuntime]:
    rt = FakeRuntime(n_seq=3)
    return KvSlots(rt), rt  # type: ignore[arg-type]


def _run(slots: KvSlots, tokens: list[int], one_off: bool = False):
    kv = slots.acquire(tokens, one_off=one_off)
    assert kv is not None
    kv.truncate(kv.common_prefix(tokens))
    kv.cached = list(tokens)
    slots.release(kv)
    return kv


def test_a_sessions_next_update_takes_the_sequence_caching_its_prompt() -> None:
    slots, _ = _pool()
    first = _run(slots, [*PREAMBLE, 1, 2, 3])
    assert _run(slots, [*PREAMBLE, 1, 2, 3, 4]) is first


def test_a_retry_leaves_the_sessions_sequence_and_copies_the_shared_preamble() -> None:
    slots, rt = _pool()
    copies: list[tuple[int, int, int]] = []
    rt.seq_copy = lambda src, dst, n: copies.append((src, dst, n))  # type: ignore[method-assign]
    session = [*PREAMBLE, 1, 2, 3]
    own = _run(slots, session)
    retry = [*PREAMBLE, 7, 8, 9]  # more examples, then the same source
    kv = _run(slots, retry, one_off=True)
    assert kv is not own
    assert copies == [(own.seq_id, kv.seq_id, len(PREAMBLE))]
    assert own.cached == session  # the next update decodes only what changed
    assert _run(slots, [*session, 4]) is own
