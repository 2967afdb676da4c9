"""``livetrans``'s options are taken as spelled: no abbreviations (a misspelling is an error
naming the closest option), errors name the subcommand's own ``--help``, ``make serve``
adds no command echo. Each case runs the installed entry point, as a user would."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.app.test_cli import _one_line_error, _run

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, expected", [
    # --lang is not --langs: the event's languages are named as a set, with --langs
    (["serve", "--lang", "en,de"], ["unrecognized arguments: --lang en,de",
                                    "did you mean --langs?", "(see livetrans serve --help)"]),
    (["serve", "--lan=en,de"], ["did you mean --langs?"]),
    (["serve", "--por", "9000"], ["--por", "did you mean --port?"]),
    (["serve", "--no-such-flag"], ["unrecognized arguments: --no-such-flag",
                                   "(see livetrans serve --help)"]),
    # the delegated tools' parsers (their own modules) are just as strict
    (["caption", "--jso", "--file", "x.jsonl"], ["did you mean --json?",
                                                 "(see livetrans caption --help)"]),
    (["eval", "--out", "x", "--method", "ab"], ["did you mean --methods?",
                                              "(see livetrans eval --help)"]),
    (["bench", "engine", "--k", "1,2"],
     ["did you mean --ks?", "(see livetrans bench engine --help)"]),
    (["trim-vocab", "--lang", "en,de"], ["(see livetrans trim-vocab --help)"]),
    (["sevre"], ["invalid choice: 'sevre'", "did you mean serve?", "(see livetrans --help)"]),
    # a bad value names the option as it is spelled
    (["serve", "--langs", "en,xx"], ["invalid --langs (LIVETRANS_LANGS)", "'xx'"]),
])
def test_abbreviations_and_misspellings_are_refused(args, expected) -> None:
    line = _one_line_error(_run(*args), *expected)
    assert line.startswith("livetrans")


def test_whole_option_names_still_work() -> None:
    """--langs=en,de is read (the model is what is missing), not refused as an option."""
    _one_line_error(_run("serve", "--langs=en,de", "--model", "/no/such/m.gguf"),
                    "/no/such/m.gguf")


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_serve_echoes_no_command(tmp_path) -> None:
    """``make serve`` prints livetrans's one line, not the command it runs first."""
    # -o: the virtual environment counts as set up (the test never reinstalls it)
    proc = subprocess.run(["make", "-C", str(REPO), "--no-print-directory", "-o",
                           ".venv/.installed", "serve", "ARGS=--lang en,de"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("livetrans serve: unrecognized arguments: --lang"), lines
    assert "bin/livetrans serve" not in proc.stdout
