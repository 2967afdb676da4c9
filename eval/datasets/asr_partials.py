"""ASR partial streams: JSONL, one utterance a line, ``{"id", "reference", "events": [{"t",
"type": "partial"|"final", "text"}]}`` (the format of eval/samples/asr_sample_en.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

from eval.datasets.aligned import DatasetNotFoundError
from eval.datasets.streams import Stream, Update


def read_asr_streams(path: Path | None, limit: int | None = None) -> list[Stream]:
    if path is None:
        raise DatasetNotFoundError(
            "no ASR partials file given: pass --asr-file (e.g. eval/samples/asr_sample_en.jsonl)")
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(
            f"ASR partials file not found: {path}. Record one with any streaming ASR "
            "(timed partial/final events per utterance, JSONL) or try "
            "eval/samples/asr_sample_en.jsonl")
    streams = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        updates = [Update(ev["text"], ev["type"] == "final", float(ev.get("t", 0.0)))
                   for ev in obj["events"] if ev.get("text", "").strip()]
        if updates and not updates[-1].is_final:
            updates[-1] = Update(updates[-1].source, True, updates[-1].t)
        streams.append(Stream(str(obj.get("id", len(streams))), updates, obj.get("reference")))
        if limit is not None and len(streams) >= limit:
            break
    return streams
