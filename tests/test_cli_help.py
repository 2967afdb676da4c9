"""``livetrans [SUB] --help`` for every subcommand: each option has its own help, in plain
text, and asking for help loads no model.

The subcommands are the ones ``app.cli`` registers (recorded while it builds its parser),
so a new subcommand is checked without editing this file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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


def _no_model(*_args, **_kwargs) -> None:  # noqa: ANN002, ANN003
    raise AssertionError("--help loaded a model")


@pytest.mark.parametrize("argv", [["--help"], *([sub, "--help"] for sub in SUBCOMMANDS)],
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


def test_top_level_help_speaks_to_users(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "livetrans serve" in out and "translation server" in out
    assert "UsageError" not in out and "``" not in out
