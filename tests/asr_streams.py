"""ASR partial streams for the page tests: a short one cut from the shared FLORES stream."""

from __future__ import annotations

import json
from pathlib import Path


def short_stream(data_dir: Path, folder: Path, utterances: int = 2, events: int = 3) -> Path:
    """The shared FLORES partials' first ``utterances`` (after the header), each cut to its
    last ``events`` updates with times from 0, as a JSONL file in ``folder``."""
    src = data_dir / "asr_partials" / "flores200_dev_en.jsonl"
    chosen = [json.loads(line) for line in src.read_text().splitlines()[1:1 + utterances]]
    for utt in chosen:
        utt["events"] = utt["events"][-events:]
        base = utt["events"][0]["t"]
        for ev in utt["events"]:
            ev["t"] = ev["t"] - base
    stream = folder / "short.jsonl"
    stream.write_text("".join(json.dumps(u) + "\n" for u in chosen))
    return stream
