"""chrF and BLEU of final translations: sacrebleu's metrics, one reference per sentence.

The wrappers fix what the eval always does (a single reference stream) so the signature
follows from the constructor's arguments alone; sacrebleu itself learns the number of
references only by scoring, which used to mean scoring a dummy corpus for a signature.
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics.base import Metric as SacreMetric
from sacrebleu.metrics.base import Signature as SacreSignature
from sacrebleu.metrics.bleu import BLEU, BLEUSignature
from sacrebleu.metrics.chrf import CHRF, CHRFSignature

from eval.metrics.base import Metric, Score


def bleu_tokenizer(lang: str) -> str:
    if lang == "zh":
        return "zh"
    if lang == "ja":
        try:
            import MeCab  # noqa: F401

            return "ja-mecab"
        except ImportError:
            return "char"
    return "13a"


class _OneReference(Metric):
    """A sacrebleu metric scored against one reference per hypothesis."""

    def __init__(self, metric: SacreMetric, signature_type: type[SacreSignature]) -> None:
        self._metric = metric
        self._signature_type = signature_type

    def signature_fields(self) -> dict[str, object]:
        # sacrebleu's own signature of these settings, with the reference count we fix
        sig = self._signature_type({**vars(self._metric), "num_refs": 1})
        return dict(field.split(":", 1) for field in sig.format().split("|"))

    def corpus_score(self, hypotheses: Sequence[str], references: Sequence[str]) -> Score:
        score = self._metric.corpus_score(list(hypotheses), [list(references)]).score
        return Score(self.name, score, self.get_signature())


class ChrF(_OneReference):
    name = "chrF"

    def __init__(self, char_order: int = 6, word_order: int = 0) -> None:
        super().__init__(CHRF(char_order=char_order, word_order=word_order), CHRFSignature)


class Bleu(_OneReference):
    """BLEU with the tokenizer for the target language (``bleu_tokenizer``)."""

    name = "BLEU"

    def __init__(self, lang: str) -> None:
        self.lang = lang
        super().__init__(BLEU(tokenize=bleu_tokenizer(lang)), BLEUSignature)


def paired_chrf_difference(hyps_a: Sequence[str], hyps_b: Sequence[str],
                           references: Sequence[str], samples: int = 1000,
                           seed: int = 12345) -> tuple[float, float, float]:
    """chrF(b) - chrF(a) on the same sentences, with a 95% paired-bootstrap interval.

    Sentences are resampled with replacement, the same indices for both systems, and the
    corpus score is recomputed from summed sentence statistics each time (Koehn 2004; as
    sacrebleu's own paired bootstrap does it). An interval that holds 0 means the two
    systems' difference is within what the choice of sentences alone moves.
    """
    import numpy as np

    metric = CHRF()
    refs = [list(references)]
    stats_a = np.array(metric._extract_corpus_statistics(list(hyps_a), refs))
    stats_b = np.array(metric._extract_corpus_statistics(list(hyps_b), refs))

    def score(stats: np.ndarray) -> float:
        return metric._compute_score_from_stats(stats.sum(0).tolist()).score

    delta = score(stats_b) - score(stats_a)
    rng = np.random.default_rng(seed)
    n = len(stats_a)
    diffs = []
    for _ in range(samples):
        idx = rng.integers(0, n, n)
        diffs.append(score(stats_b[idx]) - score(stats_a[idx]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return delta, float(low), float(high)
