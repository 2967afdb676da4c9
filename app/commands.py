"""The commands ``livetrans`` hands to other modules: the tools (``build-dict``, ``eval``,
``caption``, ...) and the benchmarks (``livetrans bench NAME``, with their old names as
aliases), each named by its module so a command loads only what it needs, and a missing
optional extra is one line naming the ``pip install`` that brings it.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable

from app.engine.cpu_threads import POLICIES, configure_omp_wait
from app.usage import PlainHelp, UsageError, omp_policy_in

_EXTRA_OF_MODULE = {"matplotlib": "eval", "sacrebleu": "eval", "tqdm": "eval",
                    "jieba": "eval", "httpx": "clients", "rich": "clients",
                    "pocketsphinx": "audio", "omnisteval": "eval"}


def delegate(module: str, func: str) -> Callable[[list[str]], int]:
    def run(argv: list[str]) -> int:
        import importlib

        try:
            target = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            extra = _EXTRA_OF_MODULE.get((exc.name or "").split(".")[0])
            if extra is None:
                raise
            raise UsageError(f"this command needs the '{extra}' extra: "
                             f"pip install 'livetrans[{extra}]'") from None
        return int(getattr(target, func)(argv) or 0)

    return run


DELEGATED: dict[str, tuple[str, str, str]] = {
    "build-dict": ("app.table_tools", "build_dict_main",
                   "build a dictionary drafter table from a text corpus"),
    "build-trigram": ("app.table_tools", "build_trigram_main",
                      "build a trigram drafter table from a text corpus"),
    "fertility": ("app.table_tools", "fertility_main", "tokens per word of a text, per language"),
    "trim-vocab": ("app.vocab_trim.cli", "main",
                   "a copy of a model keeping only the tokens some languages use"),
    "emulate": ("eval.emulator", "main", "replay references through drafters, no model"),
    "eval": ("eval.harness", "main", "quality, flicker and speed of live re-translation"),
    "caption": ("clients.caption", "main",
                "live captions from an ASR stream or speech; --room publishes them"),
    "load-test": ("clients.load_test", "main", "many live sessions + HTTP load (loopback)"),
}

# ``livetrans bench NAME``: each benchmark's module (its ``main``) and one line of help.
BENCHMARKS: dict[str, tuple[str, str]] = {
    "engine": ("eval.bench.engine", "engine cost model: decode, verify, prefill"),
    "drafters": ("eval.bench.drafters", "drafter chains vs plain decoding"),
    "ssbd": ("eval.bench.ssbd", "AR vs SSBD on FLORES lag-k streams"),
    "finals": ("eval.bench.finals",
               "a final's SSBD draft verified at once vs in parts, on the same finals"),
    "retries": ("eval.bench.retries",
                "a final's retry prompt, every example before the context vs after it"),
    "peer": ("eval.bench.peer.bench", "llama.cpp's server on two GGUF files, side by side; "
             "--live: against livetrans"),
    "concurrency": ("eval.bench.concurrency", "C concurrent streams: --parallel 1 vs --parallel C"),
    "events": ("eval.bench.events", "fan-out and room viewers: what they cost"),
    "bus": ("eval.bench.bus.bench",
            "rooms on Redis across two replicas: speaker time, viewers' delay"),
    "ubatch": ("eval.bench.ubatch", "llama.cpp's physical batch: ms per row, side by side"),
    "numerics": ("eval.bench.numerics",
                 "how batch shapes move logits and when that changes an output"),
    "speech": ("eval.bench.speech.bench",
               "word error rate and final latency: Whisper vs PocketSphinx"),
    "append": ("eval.bench.append",
               "append-only commits vs re-translation: chrF, NE, StreamLAAL, YAAL"),
    "voice": ("eval.bench.voice", "speech synthesis real-time factor per voice engine"),
    "interpreter": ("eval.bench.interpreter.bench",
                    "realtime translation: speech end to first word, first audio, final"),
    "room-voice": ("eval.bench.room_voice",
                   "a room's voice: speech end to a WebRTC listener hearing it, CPU, bytes"),
    "dict-latency": ("eval.bench.dict_latency", "dictionary lookup latency p50/p99"),
}

# The benchmarks' old commands: they still run, with a one-line notice on stderr.
BENCH_ALIASES: dict[str, str] = {
    "drafter-bench": "drafters",
    "ssbd-bench": "ssbd",
    "llama-server-bench": "peer",
    "bench-concurrency": "concurrency",
    "bench-events": "events",
    "bench-bus": "bus",
    "ubatch-bench": "ubatch",
    "numerics": "numerics",
    "speech-bench": "speech",
    "bench-append": "append",
    "voice-bench": "voice",
    "interpreter-bench": "interpreter",
    "room-voice-bench": "room-voice",
    "dict-latency": "dict-latency",
}


def bench_list() -> str:
    """What ``livetrans bench`` (no name) and ``livetrans bench --list`` print."""
    width = max(map(len, BENCHMARKS))
    lines = ["livetrans bench NAME [OPTIONS]: run one benchmark "
             "(livetrans bench NAME --help for its options)", "", "benchmarks:"]
    lines += [f"  {name:<{width}}  {help_text}" for name, (_, help_text) in BENCHMARKS.items()]
    return "\n".join(lines)


def _bench_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livetrans bench", description=bench_list(),
                                     formatter_class=PlainHelp, allow_abbrev=False)
    parser.add_argument("name", nargs="?", metavar="NAME", help="the benchmark to run")
    parser.add_argument("--list", action="store_true", help="name the benchmarks and exit")
    return parser


def run_bench(argv: list[str]) -> int:
    """``livetrans bench NAME [OPTIONS]``: one benchmark; no name (or ``--list``) lists them.
    Options without a name are the engine cost model's, as before ``bench engine``."""
    if not argv or argv[0] == "--list":
        print(bench_list())
        return 0
    if argv[0] in ("-h", "--help"):
        _bench_parser().parse_args(argv[:1])  # prints the help and exits
    name, rest = argv[0], argv[1:]
    if name.startswith("-"):
        print("livetrans bench: without a name runs the engine cost model, as before; "
              "say 'livetrans bench engine' (this form is deprecated)", file=sys.stderr)
        name, rest = "engine", argv
    elif name in BENCH_ALIASES and name not in BENCHMARKS:
        name = BENCH_ALIASES[name]
    if name not in BENCHMARKS:
        close = difflib.get_close_matches(name, list(BENCHMARKS), n=1, cutoff=0.6)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise UsageError(f"no benchmark '{name}'{hint} (livetrans bench --list names them)")
    # Benchmarks load the model too: same policy knob as the server's.
    configure_omp_wait(tool_omp_policy(rest))
    return delegate(BENCHMARKS[name][0], "main")(rest)


def run_bench_alias(command: str, argv: list[str]) -> int:
    """An old benchmark command: a one-line notice on stderr, then the same benchmark."""
    name = BENCH_ALIASES[command]
    print(f"livetrans {command} is deprecated: use 'livetrans bench {name}'", file=sys.stderr)
    return run_bench([name, *argv])


def tool_omp_policy(argv: list[str]) -> str:
    """The OMP wait policy of a tool that loads the model outside ``serve``: its
    ``--omp-wait-policy``, else ``LIVETRANS_OMP_WAIT_POLICY``, else auto. It must act
    before llama.cpp loads, so it is read (and a bad value refused) before the tool
    parses its own options."""
    given = omp_policy_in(argv)
    source = "--omp-wait-policy" if given is not None else "LIVETRANS_OMP_WAIT_POLICY"
    raw = given if given is not None else os.environ.get("LIVETRANS_OMP_WAIT_POLICY", "auto")
    policy = raw.strip().lower()
    if policy not in POLICIES:
        raise UsageError(f"invalid {source} {raw!r}: choose one of {', '.join(POLICIES)}")
    return policy
