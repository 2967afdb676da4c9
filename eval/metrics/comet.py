"""COMET (``Unbabel/wmt22-comet-da``) when its checkpoint is on this machine; never faked.

The checkpoint is looked for at an explicit path, then in the Hugging Face cache
(``~/.cache/huggingface/hub/models--Unbabel--wmt22-comet-da/snapshots/*/checkpoints/
model.ckpt``). Nothing is downloaded. Without it (or without the ``unbabel-comet``
package, the ``comet`` extra), the result says COMET was not computed and why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eval.metrics.base import Metric, Score

MODEL = "Unbabel/wmt22-comet-da"


def find_checkpoint(explicit: Path | None = None) -> Path | None:
    if explicit is not None:
        return explicit if Path(explicit).is_file() else None
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    snapshots = hub / "models--Unbabel--wmt22-comet-da" / "snapshots"
    for ckpt in sorted(snapshots.glob("*/checkpoints/model.ckpt")):
        return ckpt
    return None


class Comet(Metric):
    """COMET of finals against references, from ``checkpoint`` (or the Hugging Face
    cache). Its score is None, with the reason in ``note``, when it cannot be computed."""

    name = "COMET"

    def __init__(self, checkpoint: Path | None = None, batch_size: int = 16) -> None:
        self.checkpoint = checkpoint
        self.batch_size = batch_size

    def signature_fields(self) -> dict[str, object]:
        return {"model": MODEL, "ref": "yes"}

    def corpus_score(self, sources: Sequence[str], hypotheses: Sequence[str],
                     references: Sequence[str]) -> Score:
        ckpt = find_checkpoint(self.checkpoint)
        if ckpt is None:
            where = self.checkpoint or "the Hugging Face cache"
            return self._none(f"not computed: no {MODEL} checkpoint in {where} (download it "
                              "where a network is available, or pass --comet-checkpoint)")
        try:
            from comet import load_from_checkpoint
        except ImportError:
            return self._none("not computed: the unbabel-comet package is not installed "
                              "(pip install 'livetrans[comet]')")
        model = load_from_checkpoint(str(ckpt))
        data = [{"src": s, "mt": h, "ref": r}
                for s, h, r in zip(sources, hypotheses, references, strict=True)]
        out = model.predict(data, batch_size=self.batch_size, gpus=0, progress_bar=False)
        return Score(self.name, float(out.system_score), self.get_signature(), "computed")

    def _none(self, why: str) -> Score:
        return Score(self.name, None, self.get_signature(), why)
