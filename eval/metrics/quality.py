"""chrF and BLEU of final translations (sacrebleu), with the settings in the signature."""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF


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


def chrf_score(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    return CHRF().corpus_score(list(hypotheses), [list(references)]).score


def bleu_score(hypotheses: Sequence[str], references: Sequence[str], lang: str) -> float:
    return BLEU(tokenize=bleu_tokenizer(lang)).corpus_score(
        list(hypotheses), [list(references)]).score


def _signature(metric) -> str:  # noqa: ANN001
    metric.corpus_score(["a"], [["a"]])  # sacrebleu knows the reference count only after use
    return str(metric.get_signature())


def chrf_signature() -> str:
    return _signature(CHRF())


def bleu_signature(lang: str) -> str:
    return _signature(BLEU(tokenize=bleu_tokenizer(lang)))
