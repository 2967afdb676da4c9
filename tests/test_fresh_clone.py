"""A fresh clone, with nothing beside it, runs the README's commands as written.

The repository is cloned into a temporary folder (no ``../shared`` there), and the
commands a newcomer copies from the README and the documentation pages (``docs/*.md``) run
from it: every ``livetrans`` command of their bash blocks, in page order (``serve`` ones are
started and answer ``/health``;
the others run against a test server found through ``LIVETRANS_SERVER``), the help texts,
``caption`` on the tracked sample, and a two-sentence ``eval`` on the tracked sample in
FLORES layout. ``make serve`` / ``make test`` are what CI itself runs; the GPU build lines
reinstall llama-cpp-python and are left out.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
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


def readme_commands(text: str) -> list[list[str]]:
    """The ``livetrans`` command lines of the README's ``bash`` blocks, continuation lines
    joined and comments dropped, as argument lists without the program name."""
    commands, in_bash, pending = [], False, ""
    for line in text.splitlines():
        line = line.strip()  # a block inside a list item is indented
        if line.startswith("```"):
            in_bash = line == "```bash" and not in_bash
            continue
        if not in_bash:
            continue
        pending += line.removesuffix("\\") + " "
        if line.endswith("\\"):
            continue
        words = shlex.split(pending, comments=True)
        pending = ""
        if words[:1] == ["livetrans"]:
            commands.append(words[1:])
    return commands


def test_the_readme_command_reader() -> None:
    text = ("```bash\nlivetrans eval --a 1 \\\n    --b 2   # note\nmake test\n```\n"
            "```python\nlivetrans = 1\n```\n`livetrans caption` inline\n"
            "* item:\n\n  ```bash\n  livetrans caption --x\n  ```\n")
    assert readme_commands(text) == [["eval", "--a", "1", "--b", "2"], ["caption", "--x"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def readme_python_blocks(text: str) -> list[str]:
    """The README's ``python`` code blocks."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.strip().startswith("```"):
            if current is not None:
                blocks.append("\n".join(current))
                current = None
            elif line.strip() == "```python":
                current = []
            continue
        if current is not None:
            current.append(line)
    return blocks


def _serves(clone: Path, args: list[str], port: int | None = None,
            then: Callable[[], None] | None = None) -> None:
    """``livetrans serve ARGS`` starts and answers /health with the model loaded (and
    ``then`` runs against it)."""
    port = port or _free_port()
    environ = {**os.environ, "PYTHONPATH": str(clone)}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args, "--port", str(port)],
                            cwd=clone, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                if status.get("status") == "ok":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        assert status is not None and status.get("status") == "ok", (args, status)
        if then is not None:
            then()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "Traceback" not in out, out[-3000:]


def newcomer_pages(root: Path) -> list[Path]:
    """The README, then the documentation pages (each page's commands in its own order)."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def test_every_readme_command_runs_on_the_fresh_clone(clone: Path, live_server) -> None:
    # a command repeated on several pages (the first caption) runs once, where it first appears
    commands = [list(c) for c in dict.fromkeys(
        tuple(c) for page in newcomer_pages(clone)
        for c in readme_commands(page.read_text(encoding="utf-8")))]
    assert len(commands) >= 8 and all("shared/" not in " ".join(c) for c in commands)
    for args in commands:
        if args[0] == "serve":
            _serves(clone, args)
            continue
        done = _livetrans(clone, *args, env={"LIVETRANS_SERVER": live_server.url})
        assert done.returncode == 0 and "Traceback" not in done.stderr, \
            (args, done.stderr[-3000:])


def test_the_readme_python_examples_run_against_make_serves_address(clone: Path) -> None:
    """The SDK examples talk to http://127.0.0.1:8000, where ``make serve`` listens: they
    run as written against a server started there (skipped if the port is taken)."""
    blocks = readme_python_blocks((clone / "README.md").read_text(encoding="utf-8"))
    assert blocks and all("127.0.0.1:8000" in b for b in blocks if "OpenAI(" in b)
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.skip("port 8000 is in use here")

    def run_examples() -> None:
        for block in blocks:
            done = subprocess.run([sys.executable, "-c", block], cwd=clone, timeout=300,
                                  capture_output=True, text=True)
            assert done.returncode == 0, (block[:200], done.stderr[-3000:])
            assert done.stdout.strip(), block[:200]

    _serves(clone, ["serve"], port=8000, then=run_examples)
