"""The llama.cpp context's passes run on the cores no other part of the process computes
on (``app.engine.runtime.LlamaRuntime`` with ``app.cores.CoreLoans``)."""

from __future__ import annotations

import numpy as np
import pytest

from app.cores import CoreLoans


@pytest.fixture()
def two_threads(runtime):
    """The shared runtime on two threads with loans of its own, restored afterwards."""
    saved = (runtime.loans, runtime.threads, runtime.threads_now)
    runtime.loans = CoreLoans()
    runtime.threads = 2
    runtime.ll.llama_set_n_threads(runtime.ctx, 2, 2)
    runtime.threads_now = 2
    runtime.clear()
    yield runtime
    runtime.loans, runtime.threads, runtime.threads_now = saved
    runtime.ll.llama_set_n_threads(runtime.ctx, runtime.threads_now, runtime.threads_now)
    runtime.clear()


def _logits(rt, tokens, steps: int = 4):
    """Every row of one prompt pass, then ``steps`` greedy single-token passes (the two
    shapes partials and finals decode in)."""
    rt.truncate(0)
    rt.decode(tokens, 0, list(range(len(tokens))))
    rows = [rt.logits_row(i).copy() for i in range(len(tokens))]
    pos, token = len(tokens), int(np.argmax(rows[-1]))
    for _ in range(steps):
        rt.decode([token], pos, [0])
        rows.append(rt.logits_row(0).copy())
        pos, token = pos + 1, int(np.argmax(rows[-1]))
    return np.stack(rows)


def test_a_pass_runs_on_the_cores_left_while_some_are_lent_with_the_same_logits(two_threads):
    """While the recogniser computes on a core, a pass runs on one thread, then on two
    again; ggml gives each output element of an operation to one thread, so the logits
    are the same bit for bit (measured on 20 FLORES prompts, 832 rows of prompt passes and
    single-token steps: no difference at all). The same CPU computes both sides, so this
    holds on any CPU, not only this one's rounding."""
    rt = two_threads
    tokens = rt.tokenize("English: The cat sat on the mat.\nGerman:", add_bos=True)
    whole = _logits(rt, tokens)
    assert int(rt.ll.llama_n_threads(rt.ctx)) == 2
    with rt.loans.lent(1):
        lent = _logits(rt, tokens)
        assert int(rt.ll.llama_n_threads(rt.ctx)) == 1
    assert rt.steps_on_fewer_threads >= 1
    _logits(rt, tokens)
    assert int(rt.ll.llama_n_threads(rt.ctx)) == 2
    assert np.array_equal(whole, lent)
