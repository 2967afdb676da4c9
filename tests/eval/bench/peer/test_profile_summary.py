"""``python -m eval.bench.peer.profile_summary``: a speedscope profile read per thread."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from eval.bench.peer.profile_summary import main, summarize

PROFILE = {
    "shared": {"frames": [{"name": "run", "file": "/x/driver.py"}, {"name": "llama_decode"},
                          {"name": "absorb", "file": "/x/sequence.py"}]},
    "profiles": [
        {"name": "step-scheduler", "samples": [[0, 1]] * 30 + [[0, 2]] * 10},
        {"name": "idle", "samples": [[0]] * 3},
    ],
}


def test_shares_are_per_thread_inclusive_and_own() -> None:
    [thread] = summarize(PROFILE, min_samples=20)  # the idle thread has too few samples
    assert thread["samples"] == 40
    assert thread["inclusive"][0] == ("run (driver.py)", 100.0)
    assert dict(thread["own"]) == {"llama_decode": 75.0, "absorb (sequence.py)": 25.0}


def test_the_command_reads_a_gzipped_profile(tmp_path: Path, capsys) -> None:
    path = tmp_path / "p.speedscope.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(PROFILE, f)
    assert main([str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "step-scheduler: 40 samples" in out and "75.0%  llama_decode" in out
