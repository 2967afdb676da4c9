"""``livetrans bench finals`` on the real model: each final translated both ways from the
same KV state, counted and compared (``eval/bench/finals.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.bench.finals import main

SAMPLE = Path(__file__).resolve().parents[3] / "eval" / "samples" / "flores_layout"


def _report(tmp_path: Path, *args: str) -> dict:
    """``livetrans bench finals`` on two shipped sentences into German; its JSON report."""
    out = tmp_path / "finals.json"
    assert main(["--flores-dir", str(SAMPLE), "--langs", "de", "--limit", "2", *args,
                 "--json", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.model
def test_each_final_is_translated_both_ways_and_compared(tmp_path, capsys) -> None:
    report = _report(tmp_path, "--parts", "2")
    whole, parted = report["ways"]["whole draft"], report["ways"]["parts of 2"]
    for way in (whole, parted):
        assert way["finals"] == 2 and way["passes"] >= 2
        assert 0 <= way["draft_kept"] <= way["draft_tokens"]
    # the same drafts: kept alike, up to a near-tie moved by the other pass shape
    assert whole["draft_tokens"] > 0
    assert 0 <= report["langs"]["de"]["same_output"] <= 2
    assert report["ratio_total"] > 0
    assert "whole draft / parts of 2, total final time" in capsys.readouterr().out


@pytest.mark.model
def test_versus_give_up_runs_the_same_finals_without_and_with_it(tmp_path, capsys) -> None:
    report = _report(tmp_path, "--versus", "give-up")
    assert list(report["ways"]) == ["no give-up", "give-up"]
    assert all(way["finals"] == 2 for way in report["ways"].values())
    assert report["versus"] == "give-up" and report["ratio_total"] > 0
    assert "no give-up / give-up, total final time" in capsys.readouterr().out


def test_parts_must_be_positive() -> None:
    from app.usage import UsageError

    with pytest.raises(UsageError, match="--parts"):
        main(["--flores-dir", str(SAMPLE), "--parts", "0"])
