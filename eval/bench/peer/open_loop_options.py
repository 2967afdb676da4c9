"""``livetrans bench peer --live --open-loop``'s options (the run is
``eval.bench.peer.open_loop``)."""

from __future__ import annotations

import argparse

from app.usage import UsageError

OPEN_LOOP_METHODS = ("llama-ar", "livetrans-ar", "livetrans-ssbd")


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not a positive number: {text}")
    return value


def add_open_loop_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--open-loop", action="store_true",
                       help="speakers at a real pace instead of closed loops: each speaker "
                            "a lag-k update every --period s, the final at the sentence end, "
                            "starts staggered; latency from when the words were said to the "
                            "caption; p50/p90/p99 and the capacity per method")
    group.add_argument("--period", type=positive_float, default=1.2,
                       help="--open-loop: seconds between a speaker's updates (lag words)")
    group.add_argument("--sentences-per-speaker", type=int, default=3,
                       help="--open-loop: sentences each speaker says, back to back")
    group.add_argument("--stagger", type=float, default=None,
                       help="--open-loop: seconds between speakers' starts "
                            "(default: --period / speakers)")
    group.add_argument("--partial-bound", type=positive_float, default=1.0,
                       help="--open-loop: capacity bound on the partials' p90, s")
    group.add_argument("--final-bound", type=positive_float, default=2.0,
                       help="--open-loop: capacity bound on the finals' p90, s")


def check_open_loop_options(args: argparse.Namespace) -> None:
    if not getattr(args, "open_loop", False):
        return
    other = [m for m in args.methods if m not in OPEN_LOOP_METHODS]
    if other:
        raise UsageError(f"--open-loop: methods of {','.join(OPEN_LOOP_METHODS)} only "
                         f"(not {','.join(other)})")
    if args.sentences_per_speaker < 1:
        raise UsageError("--sentences-per-speaker: at least 1")
    if args.repeats != 1:
        raise UsageError("--open-loop runs each method once (no --repeats)")
