"""``llama-server-bench --live``'s options (``eval.bench.peer.live``); the servers are not run
here (llama-server is not part of livetrans)."""

from __future__ import annotations

import argparse

import pytest

from app.usage import UsageError
from eval.bench.peer.live import (
    add_live_options,
    check_live_options,
    parse_variants,
    pass_counters,
    prometheus_values,
)


def _prompt(lang: str = "de"):  # noqa: ANN202 - an eval.bench.peer.prompt.PinnedPrompt
    from app.model_files import resolve_model_path
    from eval.bench.peer.prompt import PinnedPrompt

    return PinnedPrompt(resolve_model_path(None), lang)


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
    with pytest.raises(UsageError, match="--samples"):
        check_live_options(_args("--samples", "0"))


def test_open_loop_takes_the_http_methods_once_each() -> None:
    check_live_options(_args("--open-loop", "--speakers", "1,2,4,8"))
    with pytest.raises(UsageError, match="methods of"):
        check_live_options(_args("--open-loop", "--methods", "llama-ar,livetrans-ws-ssbd"))
    with pytest.raises(UsageError, match="once"):
        check_live_options(_args("--open-loop", "--repeats", "2"))
    with pytest.raises(UsageError, match="at least 1"):
        check_live_options(_args("--open-loop", "--sentences-per-speaker", "0"))
    with pytest.raises(SystemExit):  # argparse's one line
        _args("--open-loop", "--period", "0")


def test_variants_are_named_serve_options_split_as_a_shell_would() -> None:
    args = _args("--variant", "nocap=--crowded-proposals 0 --serve-x 'a b'",
                 "--variant", "ub512=--n-ubatch 512")
    check_live_options(args)
    assert args.variants == [("nocap", ["--crowded-proposals", "0", "--serve-x", "a b"]),
                             ("ub512", ["--n-ubatch", "512"])]
    assert parse_variants([]) == []


@pytest.mark.parametrize("given, why", [
    ("--crowded-proposals 0", "NAME=ARGS"),      # no name
    ("=--n-ubatch 512", "NAME=ARGS"),            # an empty name
    ("a b=--n-ubatch 512", "NAME=ARGS"),         # a space in the name
    ("x" * 33 + "=--n-ubatch 512", "NAME=ARGS"),  # too long
    ("nocap=", "no serve options"),
    ("q=--x 'open", "quotation"),                # shlex: no closing quotation
])
def test_a_bad_variant_is_one_line(given: str, why: str) -> None:
    with pytest.raises(UsageError, match=why):
        parse_variants([given])


@pytest.mark.parametrize("argv", [
    ["--variant", "p=--port 8000"], ["--variant", "m=--model=/tmp/other.gguf"],
    ["--serve-args", "--host 0.0.0.0"], ["--serve-args", "--n-ubatch '48"],
    ["--variant", "p=--po 8000"], ["--serve-args", "--hos=0.0.0.0 --parallel 2"],
])
def test_options_the_benchmark_sets_itself_are_refused_in_one_line(argv) -> None:
    with pytest.raises(UsageError, match="benchmark's own|quotation"):
        check_live_options(_args(*argv))


def test_options_that_only_resemble_the_benchmarks_own_are_left_to_serve() -> None:
    args = _args("--serve-args", "--model-alias x --parallel 8",
                 "--variant", "n=--n-ubatch 48")
    check_live_options(args)
    assert args.variants == [("n", ["--n-ubatch", "48"])]


def test_a_variant_name_given_twice_is_refused() -> None:
    with pytest.raises(UsageError, match="twice"):
        parse_variants(["a=--n-ubatch 48", "a=--n-ubatch 512"])


def test_prometheus_values_sum_a_name_over_its_labels() -> None:
    text = ("# HELP llamacpp:n_decode_total calls\n# TYPE llamacpp:n_decode_total counter\n"
            "llamacpp:n_decode_total 42\n"
            "# TYPE livetrans_step_batch_rows histogram\n"
            'livetrans_step_batch_rows_bucket{le="+Inf"} 5.0\n'
            "livetrans_step_batch_rows_count 5.0\nlivetrans_step_batch_rows_sum 31.0\n"
            'livetrans_requests_total{route="chat",status="200"} 3.0\n'
            'livetrans_requests_total{route="models",status="200"} 1.0\n')
    values = prometheus_values(text)
    assert values["llamacpp:n_decode_total"] == 42.0
    assert values["livetrans_step_batch_rows_count"] == 5.0
    assert values["livetrans_step_batch_rows_sum"] == 31.0
    assert values["livetrans_requests_total"] == 4.0


def test_an_exposition_that_does_not_parse_counts_as_nothing() -> None:
    assert prometheus_values("broken line without value x\n") == {}
    assert prometheus_values("") == {}


def test_pass_counters_without_a_server_or_its_counters_are_none() -> None:
    from eval.local_server import free_port

    assert pass_counters(f"http://127.0.0.1:{free_port()}", llama=True) is None


@pytest.mark.parametrize("method", ["livetrans-ssbd", "livetrans-ws-ssbd", "livetrans-ws-ar"])
def test_a_livetrans_speaker_records_each_update_with_its_timings(live_server,
                                                                 method: str) -> None:
    import asyncio

    from eval.bench.peer.figures import MethodRun
    from eval.bench.peer.live import run_method, speaker_for
    from eval.datasets.streams import Stream, lag_k_stream

    source = "The museum opens its new wing to visitors next week."
    stream = Stream("0", lag_k_stream(source, 3), reference="")
    speaker = speaker_for(method, live_server.url, "de", _prompt(), "default")
    run = asyncio.run(run_method(speaker, [stream], 1, MethodRun(method, "m.gguf", 1)))
    assert run.errors == 0, run.first_error
    assert len(run.records) == len(stream.updates)
    assert [r.final for r in run.records] == [u.is_final for u in stream.updates]
    assert all(r.text and r.timings["server_ms"] > 0 for r in run.records)
    assert [r.index for r in run.records] == list(range(len(stream.updates)))
    if not method.startswith("livetrans-ws"):  # the pinned prompt: the same tokens
        assert all(r.timings.get("prompt_mismatch", 0) == 0 for r in run.records)
    assert all(r.timings["server_ms"] <= r.wall_ms for r in run.records)
    drafted = sum(r.timings["ssbd_draft_tokens"] for r in run.records)
    assert (drafted > 0) == method.endswith("ssbd")  # AR verifies no draft


def test_livetrans_counts_its_passes_and_their_rows(live_server) -> None:
    import asyncio

    from eval.bench.peer.figures import MethodRun
    from eval.bench.peer.live import run_method, speaker_for
    from eval.datasets.streams import Stream, lag_k_stream

    stream = Stream("0", lag_k_stream("Rain is expected over the hills tonight.", 3),
                    reference="")
    speaker = speaker_for("livetrans-ssbd", live_server.url, "de", _prompt(), "default")
    before = pass_counters(live_server.url, llama=False)
    run = asyncio.run(run_method(speaker, [stream], 1, MethodRun("x", "m.gguf", 1)))
    after = pass_counters(live_server.url, llama=False)
    assert run.errors == 0 and before is not None and after is not None
    passes, rows = after[0] - before[0], after[1] - before[1]
    # every update is at least one pass, and a pass carries at least one row
    assert passes >= len(stream.updates) and rows >= passes


def test_a_repeat_sends_its_streams_as_new_sessions(live_server) -> None:
    """``--repeats 2``: the second pass of a method re-sends the same streams; under the
    first pass's session ids they would be late updates (409), so each repeat has its own."""
    import asyncio

    from eval.bench.peer.figures import MethodRun
    from eval.bench.peer.live import run_method, speaker_for
    from eval.datasets.streams import Stream, lag_k_stream

    stream = Stream("0", lag_k_stream("The choir sings on Sunday.", 3), reference="")
    for repeat in range(2):
        speaker = speaker_for("livetrans-ar", live_server.url, "de", _prompt(), "default",
                              run_tag=f"repeat-test-r{repeat}")
        run = asyncio.run(run_method(speaker, [stream], 1, MethodRun("x", "m.gguf", 1)))
        assert run.errors == 0, run.first_error
