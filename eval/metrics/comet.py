"""COMET (``Unbabel/wmt22-comet-da``) when its checkpoint is on this machine; never faked.

The checkpoint is looked for at an explicit path, then in the Hugging Face cache
(``~/.cache/huggingface/hub/models--Unbabel--wmt22-comet-da/snapshots/*/checkpoints/
model.ckpt``). Nothing is downloaded. Without it (or without the ``unbabel-comet``
package, the ``comet`` extra), the result says COMET was not computed and why.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MODEL = "Unbabel/wmt22-comet-da"


@dataclass
class CometResult:
    score: float | None
    reason: str  # "computed" or why not
    signature: str

    @property
    def computed(self) -> bool:
        return self.score is not None


def find_checkpoint(explicit: Path | None = None) -> Path | None:
    if explicit is not None:
        return explicit if Path(explicit).is_file() else None
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    snapshots = hub / "models--Unbabel--wmt22-comet-da" / "snapshots"
    for ckpt in sorted(snapshots.glob("*/checkpoints/model.ckpt")):
        return ckpt
    return None


def comet_score(sources: Sequence[str], hypotheses: Sequence[str], references: Sequence[str],
                checkpoint: Path | None = None, batch_size: int = 16) -> CometResult:
    signature = f"comet|model:{MODEL}|ref:yes"
    ckpt = find_checkpoint(checkpoint)
    if ckpt is None:
        where = checkpoint or "the Hugging Face cache"
        return CometResult(None, f"not computed: no {MODEL} checkpoint in {where} "
                                 "(download it where a network is available, or pass "
                                 "--comet-checkpoint)", signature)
    try:
        from comet import load_from_checkpoint
    except ImportError:
        return CometResult(None, "not computed: the unbabel-comet package is not installed "
                                 "(pip install 'livetrans[comet]')", signature)
    model = load_from_checkpoint(str(ckpt))
    data = [{"src": s, "mt": h, "ref": r}
            for s, h, r in zip(sources, hypotheses, references, strict=True)]
    out = model.predict(data, batch_size=batch_size, gpus=0, progress_bar=False)
    return CometResult(float(out.system_score), "computed", signature)
