"""How often each token of a model occurs in some text, through the model's own tokenizer.

Text is counted as the server will see it: each corpus line with the space that precedes
running text (``drafters.segment.leading``: none for Chinese and Japanese), and the prompt
the server builds around a source (its labels and few-shot examples) for every pair of the
served languages.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import permutations

import numpy as np

from app.engine.vocab import LlamaVocab
from app.translation.prompts import FEW_SHOT_EXAMPLES, FewShotFormat, tokenize_prompt
from drafters.segment import leading


def count_lines(vocab: LlamaVocab, lines: Iterable[str], lang: str | None = None) -> np.ndarray:
    """Occurrences of each token id in ``lines`` (one segment each)."""
    counts = np.zeros(vocab.n_vocab, dtype=np.int64)
    lead = leading(lang) if lang else " "
    for line in lines:
        ids = vocab.tokenize(lead + line)
        if ids:
            counts += np.bincount(ids, minlength=vocab.n_vocab)
    return counts


def count_prompts(vocab: LlamaVocab, langs: list[str]) -> np.ndarray:
    """Occurrences of each token id in the server's own prompts between ``langs``."""
    counts = np.zeros(vocab.n_vocab, dtype=np.int64)
    fmt = FewShotFormat(n_examples=max(len(v) for v in FEW_SHOT_EXAMPLES.values()))
    for source, target in permutations(langs, 2):
        ids = tokenize_prompt(fmt.translation("", source, target), vocab.tokenize)
        counts += np.bincount(ids, minlength=vocab.n_vocab)
    return counts
