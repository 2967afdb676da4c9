"""Plain help: every default that means something is shown, "not set" is not."""

from __future__ import annotations

import argparse

from app.usage import PlainHelp


def _help(**defaults: object) -> str:
    ap = argparse.ArgumentParser(prog="x", formatter_class=PlainHelp)
    for name, default in defaults.items():
        ap.add_argument(f"--{name}", default=default, help=f"the {name}")
    return ap.format_help()


def test_zero_is_shown_and_unset_defaults_are_not() -> None:
    text = _help(offset=0, lag=3, drafters="", model=None, verbose=False)
    assert "the offset (default: 0)" in text and "the lag (default: 3)" in text
    assert "default: )" not in text and "default: None" not in text
    assert "default: False" not in text
