"""Recorded ASR streams (JSONL, one utterance a line), read and checked before a client
sends anything.

Each line is ``{"events": [{"t": 0.6, "type": "partial", "text": "..."}, ...,
{"type": "final", ...}], "reference": "..."}`` (the format of eval/samples/asr_sample_en.jsonl;
``t`` and ``reference`` are optional). A line that breaks the format is refused as one
``UsageError`` naming the file and line, so a wrong file never reaches the server half-sent
or ends in a ``KeyError`` traceback.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from app.usage import UsageError, require_file

EVENT_TYPES = ("partial", "final")
EXAMPLE_EVENT = '{"type": "partial", "text": "..."}'


def json_line(line: str, where: str) -> dict:
    """One JSON object, or a ``UsageError`` saying where the input went wrong."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not JSON ({exc.msg}); expected one JSON object per "
                         f"line, e.g. {EXAMPLE_EVENT}") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def check_event(event: object, where: str) -> dict:
    """``event`` if it is a partial or final with text (and a time ``t``, if any, that is a
    number of seconds >= 0), else ``UsageError``."""
    if not isinstance(event, dict) or event.get("type") not in EVENT_TYPES \
            or not isinstance(event.get("text"), str):
        raise UsageError(f"{where}: expected {{\"type\": \"partial\" or \"final\", "
                         f"\"text\": \"...\"}}")
    t = event.get("t", 0.0)
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        raise UsageError(f"{where}: 't' must be a number of seconds >= 0")
    return event


def load_utterances(path: Path | str | None, limit: int | None = None,
                    option: str = "--file") -> list[dict]:
    """The first ``limit`` utterances (all when ``None`` or 0) of the file ``option`` names,
    each checked; an empty file is refused too (there would be nothing to send)."""
    path = require_file(path, option)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option} {path}: cannot read it ({exc})") from None
    utterances = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if limit and len(utterances) == limit:
            break
        where = f"{path} line {number}"
        utterance = json_line(line, where)
        events = utterance.get("events")
        if not isinstance(events, list) or not events:
            raise UsageError(f"{where}: an utterance needs a non-empty 'events' list")
        for k, event in enumerate(events, 1):
            check_event(event, f"{where}, event {k}")
        utterances.append(utterance)
    if not utterances:
        raise UsageError(f"{option} {path}: no utterances in the file")
    return utterances
