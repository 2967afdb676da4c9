"""Recorded ASR streams are checked line by line before a client sends anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.usage import UsageError
from clients.asr_file import load_utterances

SAMPLE = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"


def test_the_tracked_sample_loads_and_limit_cuts_it() -> None:
    assert len(load_utterances(SAMPLE)) == 3
    assert len(load_utterances(SAMPLE, 2)) == 2


@pytest.mark.parametrize("line, says", [
    ("plain words", "line 1: not JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"reference": "x"}', "non-empty 'events' list"),
    ('{"events": []}', "non-empty 'events' list"),
    ('{"events": ["Hello"]}', "event 1: expected"),
    ('{"events": [{"type": "draft", "text": "x"}]}', "event 1: expected"),
    ('{"events": [{"type": "final", "text": 3}]}', "event 1: expected"),
    ('{"events": [{"type": "final", "text": "x", "t": -1}]}', "'t' must be"),
    ('{"events": [{"type": "final", "text": "x", "t": true}]}', "'t' must be"),
])
def test_a_broken_line_is_named(tmp_path, line, says) -> None:
    path = tmp_path / "asr.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError, match=says):
        load_utterances(path)


def test_missing_folder_empty_and_undecodable_files_are_usage_errors(tmp_path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "latin1.jsonl").write_bytes(json.dumps({"events": []}).encode() + b"\xe9\n")
    for path, says in ((tmp_path / "none.jsonl", "no such file"), (tmp_path, "is a folder"),
                       (tmp_path / "empty.jsonl", "no utterances"),
                       (tmp_path / "latin1.jsonl", "cannot read it")):
        with pytest.raises(UsageError, match=says):
            load_utterances(path, option="--asr-file")
