"""A fresh clone, with nothing beside it, runs the README's non-server commands.

The repository is cloned into a temporary folder (no ``../shared`` there), and the
commands a newcomer copies from the README run from it: the help texts, ``caption`` on the
tracked sample against a test server (found through ``LIVETRANS_SERVER``), and a
two-sentence ``eval`` on the tracked sample in FLORES layout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout")
    where = tmp_path_factory.mktemp("fresh") / "livetrans"
    subprocess.run(["git", "clone", "-q", str(REPO), str(where)], check=True)
    assert not (where.parent / "shared").exists()
    return where


def _livetrans(clone: Path, *args: str, env: dict | None = None,
               timeout: int = 600) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(clone), **(env or {})}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=clone, env=environ,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args", [["--help"], ["serve", "--help"], ["caption", "--help"],
                                  ["eval", "--help"], ["--version"]])
def test_help_texts(clone: Path, args: list[str]) -> None:
    done = _livetrans(clone, *args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_caption_on_the_tracked_sample(clone: Path, live_server) -> None:
    done = _livetrans(clone, "caption", "--file", "eval/samples/asr_sample_en.jsonl",
                      "--target-lang", "de", "--fast", "--quiet", "--json",
                      env={"LIVETRANS_SERVER": live_server.url})
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    assert stats["finals"] == 3 and stats["errors"] == 0


def test_two_sentence_eval_on_the_tracked_sample(clone: Path) -> None:
    done = _livetrans(clone, "eval", "--dataset", "flores", "--flores-dir",
                      "eval/samples/flores_layout", "--langs", "de", "--limit", "2",
                      "--methods", "ar", "--betas", "0.2", "--mask-k", "3",
                      "--out", "results/sample")
    assert done.returncode == 0, done.stderr[-2000:]
    tables = (clone / "results" / "sample" / "tables.md").read_text()
    assert "Table 2" in tables
