"""``livetrans [SUB] --help`` for every subcommand: each option has its own help, in plain
text, and asking for help loads no model.

The subcommands are the ones ``app.cli`` registers (recorded while it builds its parser),
so a new subcommand is checked without editing this file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from app import cli
from app.engine.runtime import LlamaRuntime
from app.engine.vocab import LlamaVocab


def _subcommands() -> list[str]:
    """The names ``livetrans --help`` lists, as ``app.cli`` adds them to its parser."""
    names: list[str] = []
    original = argparse._SubParsersAction.add_parser

    def record(self, name, **kwargs):  # noqa: ANN001, ANN202 - argparse's signature
        names.append(name)
        return original(self, name, **kwargs)

    with mock.patch.object(argparse._SubParsersAction, "add_parser", record), \
            contextlib.redirect_stdout(io.StringIO()), pytest.raises(SystemExit):
        cli.main(["--help"])
    return names


SUBCOMMANDS = _subcommands()


def test_the_cli_lists_its_subcommands() -> None:
    assert "serve" in SUBCOMMANDS
    assert set(cli.DELEGATED) <= set(SUBCOMMANDS)


BENCHMARKS = [["bench", name, "--help"] for name in cli.BENCHMARKS]


def _no_model(*_args, **_kwargs) -> None:  # noqa: ANN002, ANN003
    raise AssertionError("--help loaded a model")


@pytest.mark.parametrize("argv", [["--help"], *([sub, "--help"] for sub in SUBCOMMANDS),
                                  *BENCHMARKS],
                         ids=lambda argv: " ".join(argv))
def test_every_option_has_plain_help(argv, monkeypatch, capsys) -> None:
    monkeypatch.delenv("LIVETRANS_OMP_WAIT_POLICY", raising=False)
    # help must not wait for a model: loading one (weights or vocabulary) fails the test
    monkeypatch.setattr(LlamaRuntime, "__init__", _no_model)
    monkeypatch.setattr(LlamaVocab, "load", classmethod(_no_model))
    options: list[tuple[tuple[str, ...], str | None]] = []
    original = argparse._ActionsContainer.add_argument

    def record(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        action = original(self, *args, **kwargs)
        if action.option_strings:
            options.append((tuple(action.option_strings), action.help))
        return action

    monkeypatch.setattr(argparse._ActionsContainer, "add_argument", record)
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code in (0, None)
    out = capsys.readouterr().out
    prog = " ".join(["livetrans", *argv[:-1]])
    assert out.startswith(f"usage: {prog}"), out[:200]

    checked = [(flags, text) for flags, text in options if flags != ("-h", "--help")]
    assert checked, "no options recorded"
    missing = [flags for flags, text in checked if not (text or "").strip()]
    assert not missing, f"options without help: {missing}"
    markup = [flags for flags, text in checked if "``" in (text or "")]
    assert not markup, f"help with ``markup``: {markup}"
    assert "``" not in out
    # help speaks to users of a clone: no paths of our development machines
    assert "shared/" not in out, "help names a shared/ path a clone does not have"
    assert not paths_a_clone_lacks(out), paths_a_clone_lacks(out)


def test_top_level_help_speaks_to_users(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "livetrans serve" in out and "translation server" in out
    assert "UsageError" not in out and "``" not in out


REPO = Path(__file__).resolve().parents[1]
# roots of data that lives beside a development checkout, never in a clone
_OUTSIDE = re.compile(r"(?<![\w/.-])(?:\.\./|~/|/work/|shared/|data_cache/)[^\s,;)'\"]*")
# a relative path with a folder and a file name with an extension (eval/samples/x.jsonl)
_FILE = re.compile(r"(?<![\w/.:<{$-])((?:[\w.-]+/)+[\w-]+\.[A-Za-z0-9]{1,6})(?![\w/>}])")
_TOP = tuple(p.name + "/" for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))


def paths_a_clone_lacks(text: str) -> list[str]:
    """Paths a help text names that a fresh clone does not have: data beside a development
    checkout (``shared/``, ``../``, ``data_cache/``), or a repository file or folder that does
    not exist. Placeholders (``DIR``, ``<lang>``) and what an example writes (``--out X``)
    are not paths to check."""
    found = [m.group(0) for m in _OUTSIDE.finditer(text)]
    words = text.replace("\\\n", " ").split()
    outputs = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--out", ">")}
    for m in _FILE.finditer(text):
        path = m.group(1).split("=")[-1]
        if path not in outputs and not (REPO / path).exists():
            found.append(path)
    for word in words:
        path = word.strip(".,;:()[]'\"`").split("=")[-1]
        if path.startswith(_TOP) and path not in outputs and not (REPO / path).exists():
            found.append(path)
    return sorted(set(found))


def test_the_path_check_finds_what_a_clone_lacks() -> None:
    text = ("--file de=flores/dev/deu_Latn.dev --dict-dir data_cache/dicts ../shared/data "
            "--file eval/samples/asr_sample_en.jsonl --out reports/new-run "
            "<dict-dir>/<lang>.trigram.npz tokens/s p50/p99 http://127.0.0.1:8000/v1 "
            "eval/samples/no_such.jsonl")
    assert paths_a_clone_lacks(text) == ["../shared/data", "data_cache/dicts",
                                         "eval/samples/no_such.jsonl",
                                         "flores/dev/deu_Latn.dev"]


@pytest.mark.parametrize("module", ["clients.openai_retranslation", "clients.caption"])
def test_the_client_modules_help_too(module) -> None:
    """The clients run as ``python -m``: their help follows the same rules."""
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ") and "``" not in proc.stdout
    assert not paths_a_clone_lacks(proc.stdout), paths_a_clone_lacks(proc.stdout)
