"""Selection rules at one position, checked against the literal formulas."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.verify import SelectionStats, biased_greedy, greedy, sampled, top2_gap


def _mixed_argmax(row: np.ndarray, draft: int, beta: float) -> int:
    """The formula as written: argmax((1-beta) softmax(row) + beta onehot(draft))."""
    p = np.exp(row.astype(np.float64) - row.max())
    p /= p.sum()
    mixed = (1 - beta) * p
    mixed[draft] += beta
    return int(np.argmax(mixed))


@pytest.mark.parametrize("beta", [0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.5, 0.7])
def test_biased_greedy_matches_the_mixture_formula(beta: float) -> None:
    rng = np.random.default_rng(0)
    stats = SelectionStats()
    for _ in range(400):
        row = rng.normal(0, rng.uniform(0.5, 4.0), size=257).astype(np.float32)
        draft = int(rng.integers(0, 257))
        assert biased_greedy(row, draft, beta, stats) == _mixed_argmax(row, draft, beta)


def test_beta_zero_is_plain_greedy() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        row = rng.normal(size=100).astype(np.float32)
        assert biased_greedy(row, int(rng.integers(0, 100)), 0.0) == greedy(row)


def test_lse_is_skipped_when_the_draft_is_the_argmax() -> None:
    row = np.array([0.0, 5.0, 1.0], dtype=np.float32)
    stats = SelectionStats()
    assert biased_greedy(row, 1, 0.2, stats) == 1
    assert stats.lse_computed == 0 and stats.biased_checks == 0


def test_sampling_against_a_draft_reproduces_the_model_distribution() -> None:
    """Speculative sampling with a one-hot draft (beta 0) must sample exactly softmax(row)."""
    rng = np.random.default_rng(7)
    row = np.array([2.0, 1.0, 0.5, -1.0, 0.0], dtype=np.float32)
    target = np.exp(row - row.max())
    target /= target.sum()
    n = 20000
    counts = np.zeros(len(row))
    for _ in range(n):
        counts[sampled(row, 1, 0.0, 1.0, rng)] += 1
    tv = 0.5 * np.abs(counts / n - target).sum()
    assert tv < 0.02


def test_top2_gap() -> None:
    assert top2_gap(np.array([1.0, 3.0, 2.5], dtype=np.float32)) == pytest.approx(0.5)
