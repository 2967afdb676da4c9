"""The one tolerance of every test that compares outputs across batch shapes.

llama.cpp's CPU kernels give a row different logits depending on the shape of the batch
it is computed in (how many rows, the prompt's chunking, other sequences' cells): the
same token path, recomputed in one verify pass, in a batch shared with three other
sequences, after a chunked or a cached prefill, moved the gap between the reference's two
best tokens by up to NEAR_TIE logits (``livetrans bench numerics``, README "Numerics"). Two
shapes' greedy outputs can therefore part only at a token whose top-2 gap is below that
spread; a first difference at a larger gap is a bug, and these tests fail on it.
"""

from __future__ import annotations

from collections.abc import Sequence

# The largest spread of a top-2 gap across shapes measured by `livetrans bench numerics` on 200
# FLORES dev sentences, 8381 rows (en->de, 2-core x86-64 CPU, the bundled Q4_K_M model) at
# the physical batch the tests run with (48 rows on the CPU, app.engine.runtime.CPU_UBATCH):
# 1.64 logits, rounded up to a tenth (p99 0.80; the largest gap at which two shapes'
# outputs actually parted: 0.61). reports/2026-11-27-passes/numerics-ubatch48-200/.
# At 512 rows the same run measured 2.16 (reports/2026-11-24-numerics/): a test run
# at another physical batch needs its own measurement first.
NEAR_TIE = 1.7


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    """Index of the first token where ``a`` and ``b`` differ (the shorter length if one is
    a prefix of the other)."""
    return next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
