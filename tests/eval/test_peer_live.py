"""``llama-server-bench --live``'s options (``eval.peer_live``); the servers are not run
here (llama-server is not part of livetrans)."""

from __future__ import annotations

import argparse

import pytest

from app.usage import UsageError
from eval.peer_live import add_live_options, check_live_options


def _args(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--langs", type=lambda s: s.split(","), default=["de"])
    add_live_options(ap)
    return ap.parse_args(list(argv))


def test_live_options_refuse_unknown_methods_and_several_languages() -> None:
    check_live_options(_args("--live", "--speakers", "1,8"))
    with pytest.raises(UsageError, match="unknown"):
        check_live_options(_args("--methods", "llama-ar,fast"))
    with pytest.raises(UsageError, match="one language"):
        check_live_options(_args("--langs", "de,ja"))
    with pytest.raises(UsageError, match="at least one"):
        check_live_options(_args("--speakers", ","))
    with pytest.raises(SystemExit):  # argparse's one line: not a positive whole number
        _args("--speakers", "1,0")
    args = _args("--speakers", "1,8", "--methods", "llama-ar,livetrans-ssbd@previous")
    check_live_options(args)
    assert args.speakers == [1, 8] and args.methods == ["llama-ar", "livetrans-ssbd@previous"]
