"""Normalized erasure (SSBD formula 4): how much already-shown text a stream takes back.

E(i) = |Y(i-1)| - |LCP(Y(i-1), Y(i))| counts the tokens deleted from the end of the
previous output to reach the next one; NE = sum_i E(i) / |Y(N)| divides by the length of the
final output. Streams are scored on words (space-delimited scripts) or characters (zh, ja).
The corpus score sums erasures and final lengths over all streams; the mean of per-stream
NE is reported too.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.prefix import common_prefix


def units(text: str, unit: str) -> list[str]:
    """Split ``text`` into the units NE counts: ``word`` (whitespace), ``char``, or a
    sacrebleu tokenizer name (``13a``, ``zh``, ``ja-mecab``, ``flores101``)."""
    if unit == "word":
        return text.split()
    if unit == "char":
        return [ch for ch in text if not ch.isspace()]
    return _sacrebleu_tokenizer(unit)(text).split()


_TOKENIZERS: dict = {}


def _sacrebleu_tokenizer(name: str):  # noqa: ANN202
    if name not in _TOKENIZERS:
        import importlib

        from sacrebleu.metrics.bleu import _TOKENIZERS as known

        if name not in known:
            raise ValueError(f"unknown unit {name!r}")
        module, cls = known[name].rsplit(".", 1)
        mod = importlib.import_module(f"sacrebleu.tokenizers.{module}")
        _TOKENIZERS[name] = getattr(mod, cls)()
    return _TOKENIZERS[name]


def flores101_available() -> bool:
    """True when sacrebleu's flores101 SentencePiece model is cached (it is never fetched)."""
    import os

    from sacrebleu.utils import SACREBLEU_DIR

    return os.path.exists(os.path.join(SACREBLEU_DIR, "models", "flores101_sacrebleu.spm"))


def ne_unit(lang: str) -> str:
    """The tokenizer NE is counted in for ``lang``, offline: flores101 when its model is
    cached (as in the SSBD paper), else 13a for spaced scripts, zh for Chinese, ja-mecab for
    Japanese when MeCab is installed, else characters."""
    if flores101_available():
        return "flores101"
    from eval.metrics.quality import bleu_tokenizer

    return bleu_tokenizer(lang)


lcp_len = common_prefix  # the name the erasure formulas use


def erasures(outputs: Sequence[Sequence[str]]) -> list[int]:
    """E(i) for i = 1..N-1 over tokenized outputs."""
    pairs = zip(outputs, outputs[1:], strict=False)
    return [len(prev) - lcp_len(prev, cur) for prev, cur in pairs]


def stream_erasure(outputs: Sequence[str], unit: str = "word") -> tuple[int, int]:
    """(total erasure, final length) of one stream of output strings."""
    toks = [units(o, unit) for o in outputs]
    return sum(erasures(toks)), len(toks[-1]) if toks else 0


def normalized_erasure(streams: Sequence[Sequence[str]], unit: str = "word") -> float:
    """Corpus NE: sum of erasures over sum of final lengths."""
    total = final = 0
    for outputs in streams:
        e, n = stream_erasure(outputs, unit)
        total += e
        final += n
    return total / final if final else 0.0


normalized_erasure_corpus = normalized_erasure


def ne_signature(unit: str, display_k: int | None = None) -> str:
    shown = "full" if display_k is None else f"display-mask-k:{display_k}"
    return f"ne|tok:{unit}|agg:sum-erasure/sum-final-len|outputs:{shown}|formula:ssbd-4"
