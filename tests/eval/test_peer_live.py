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


@pytest.mark.parametrize("method", ["livetrans-ssbd", "livetrans-ws-ssbd", "livetrans-ws-ar"])
def test_a_livetrans_speaker_records_each_update_with_its_timings(live_server,
                                                                 method: str) -> None:
    import asyncio

    from eval.datasets.streams import Stream, lag_k_stream
    from eval.peer_figures import MethodRun
    from eval.peer_live import run_method, speaker_for

    source = "The museum opens its new wing to visitors next week."
    stream = Stream("0", lag_k_stream(source, 3), reference="")
    caps = {u.source: 64 for u in stream.updates}
    speaker = speaker_for(method, live_server.url, "de", caps, "default")
    run = asyncio.run(run_method(speaker, [stream], 1, MethodRun(method, "m.gguf", 1)))
    assert run.errors == 0, run.first_error
    assert len(run.records) == len(stream.updates)
    assert [r.final for r in run.records] == [u.is_final for u in stream.updates]
    assert all(r.text and r.timings["server_ms"] > 0 for r in run.records)
    assert all(r.timings["server_ms"] <= r.wall_ms for r in run.records)
    drafted = sum(r.timings["ssbd_draft_tokens"] for r in run.records)
    assert (drafted > 0) == method.endswith("ssbd")  # AR verifies no draft
