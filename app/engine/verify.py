"""Token selection at one position: greedy, SSBD-biased greedy, and speculative sampling.

SSBD mixes the model's distribution with a one-hot on the draft token,
``P' = (1 - beta) * P + beta * onehot(d)``, and takes the argmax (greedy) or samples from
``P'``. For greedy verification the argmax of ``P'`` is the draft token exactly when
``p_max - p_d <= beta / (1 - beta)``. That needs probabilities, i.e. a log-sum-exp over the
whole 262k vocabulary (about a millisecond in numpy). Most positions never need it:

* the draft token is the argmax -> accepted, no softmax;
* ``beta == 0`` -> plain greedy, no softmax;
* ``p_max - p_d = p_max * (1 - exp(l_d - l_max)) <= 1 - exp(l_d - l_max)``, so when
  ``1 - exp(l_d - l_max) <= beta / (1 - beta)`` the draft wins without knowing ``p_max``.

Only the remaining positions pay for the log-sum-exp; ``SelectionStats`` counts them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class SelectionStats:
    """How often the expensive path (a full log-sum-exp) was needed."""

    biased_checks: int = 0
    lse_computed: int = 0


def logsumexp(row: np.ndarray, row_max: float) -> float:
    return row_max + math.log(float(np.exp(row - row_max).sum()))


def greedy(row: np.ndarray) -> int:
    """Plain greedy: the first index of the maximum (ties resolve to the lower id)."""
    return int(np.argmax(row))


def biased_greedy(
    row: np.ndarray, draft_token: int, beta: float, stats: SelectionStats | None = None
) -> int:
    """argmax of ``(1-beta) P + beta onehot(draft_token)``, computed lazily.

    With ``beta == 0`` this is exactly ``greedy(row)``, which makes SSBD lossless.
    """
    top = int(np.argmax(row))
    if top == draft_token or beta <= 0.0:
        return top
    if stats is not None:
        stats.biased_checks += 1
    if beta >= 0.5:
        # P'(d) >= beta >= 0.5 >= (1 - beta) >= P'(any other token).
        return draft_token
    margin = beta / (1.0 - beta)
    l_max = float(row[top])
    l_d = float(row[draft_token])
    if 1.0 - math.exp(l_d - l_max) <= margin:
        return draft_token
    if stats is not None:
        stats.lse_computed += 1
    lse = logsumexp(row, l_max)
    p_max = math.exp(l_max - lse)
    p_d = math.exp(l_d - lse)
    return draft_token if p_max - p_d <= margin else top


def softmax(row: np.ndarray, temperature: float) -> np.ndarray:
    scaled = row.astype(np.float64) / temperature
    scaled -= scaled.max()
    probs = np.exp(scaled)
    probs /= probs.sum()
    return probs


def sample_from(probs: np.ndarray, rng: np.random.Generator) -> int:
    """Inverse-CDF sampling: one cumulative sum, one binary search."""
    cdf = np.cumsum(probs)
    idx = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return min(idx, len(probs) - 1)


def sampled(
    row: np.ndarray,
    draft_token: int | None,
    beta: float,
    temperature: float,
    rng: np.random.Generator,
) -> int:
    """Speculative sampling against a deterministic draft (q = one-hot on the draft token).

    Accept the draft token with probability ``min(1, P'(d) / q(d)) = P'(d)``; on rejection
    sample from the residual ``max(0, P' - q)`` normalised, which is ``P'`` with ``d`` removed.
    The result is distributed exactly as ``P'`` (and as ``P`` when ``beta == 0``).
    """
    probs = softmax(row, temperature)
    if draft_token is None:
        return sample_from(probs, rng)
    if beta > 0.0:
        probs = (1.0 - beta) * probs
        probs[draft_token] += beta
    p_d = float(probs[draft_token])
    if rng.random() < p_d:
        return draft_token
    probs[draft_token] = 0.0
    if probs.sum() <= 0.0:  # the draft token had all the mass
        return draft_token
    return sample_from(probs, rng)


def top2_gap(row: np.ndarray) -> float:
    """Logit gap between the best and second-best token (how close a near-tie is)."""
    top2 = np.partition(row, -2)[-2:]
    return float(abs(top2[1] - top2[0]))
