"""``livetrans bench retries`` on the real model: the same pathological finals retried with
both retry-prompt layouts from the same KV state (``eval/bench/retries.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.usage import UsageError
from eval.bench.retries import WAYS, main

SAMPLE = Path(__file__).resolve().parents[3] / "eval" / "samples" / "flores_layout"


@pytest.mark.model
def test_each_retry_runs_both_ways_and_the_late_examples_decode_fewer_prompt_rows(
        tmp_path, capsys) -> None:
    out = tmp_path / "retries.json"
    assert main(["--flores-dir", str(SAMPLE), "--langs", "de", "--limit", "8",
                 "--json", str(out)]) == 0
    entry = json.loads(out.read_text())["langs"]["de"]
    ways = [entry["ways"][name] for name in WAYS]
    assert entry["sentences"] == 8
    for way in ways:
        assert way["retries"] == entry["retried"] and 0 <= way["clean"] <= way["retries"]
    if entry["retried"]:
        # the session caches the context: only the late layout's retry skips it
        assert ways[1]["prompt_rows_p50"] < ways[0]["prompt_rows_p50"]
        assert "total retry time" in capsys.readouterr().out


def test_offset_and_context_must_not_be_negative() -> None:
    with pytest.raises(UsageError, match="--offset"):
        main(["--flores-dir", str(SAMPLE), "--context", "-1"])
