"""Normalized erasure (SSBD formula 4): how much already-shown text a stream takes back.

E(i) = |Y(i-1)| - |LCP(Y(i-1), Y(i))| counts the tokens deleted from the end of the
previous output to reach the next one; NE = sum_i E(i) / |Y(N)| divides by the length of the
final output. Streams are scored on words (space-delimited scripts) or characters (zh, ja),
or on a sacrebleu tokenizer's tokens. The corpus score sums erasures and final lengths over
all streams. The arithmetic itself lives in ``app.prefix`` (the caption client uses it too).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.prefix import normalized_erasure
from app.translation.display import split_units
from eval.metrics.base import Metric, Score


def units(text: str, unit: str) -> list[str]:
    """Split ``text`` into the units NE counts: ``word`` (whitespace), ``char``, or a
    sacrebleu tokenizer name (``13a``, ``zh``, ``ja-mecab``, ``flores101``)."""
    if unit in ("word", "char"):
        return split_units(text, unit)  # type: ignore[arg-type]
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


class NormalizedErasure(Metric):
    """Corpus NE in ``unit``, of the full outputs or of what a display showed.

    ``display`` names the display policy whose outputs are scored (``mask-k``, ``stable``;
    None: the full outputs) and ``display_k`` its k; they only label the signature (the
    caller passes the displayed texts), so that two NE numbers are never mixed up.
    """

    name = "ne"

    def __init__(self, unit: str = "word", display: str | None = None,
                 display_k: int | None = None) -> None:
        self.unit = unit
        self.display = display
        self.display_k = display_k

    def signature_fields(self) -> dict[str, object]:
        shown = "full"
        if self.display is not None:
            shown = f"display-{self.display}"
            if self.display_k is not None:
                shown += f":{self.display_k}"
        return {"tok": self.unit, "agg": "sum-erasure/sum-final-len", "outputs": shown,
                "formula": "ssbd-4"}

    def corpus_score(self, streams: Sequence[Sequence[str]]) -> Score:
        """``streams``: per stream, its output texts in order (the last is the final)."""
        split = [[units(o, self.unit) for o in outputs] for outputs in streams]
        return Score(self.name, normalized_erasure(split), self.get_signature())
