"""Dictionary lookup latency: ``livetrans bench dict-latency --dict de.dict --text refs.txt``.

Times ``DictionaryDrafter.lookup`` on histories cut from real text (every prefix of every
line, tokenized with the model's tokenizer), ``--lookups`` times, one call at a time with
``perf_counter_ns``; prints p50/p99 in microseconds, the hit rate and the file size.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from app.usage import PlainHelp, add_model_options
from drafters.build import read_lines
from drafters.dictionary import DictionaryDrafter


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench dict-latency", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--dict", type=Path, required=True,
                    help="dictionary file built by build-dict (<lang>.dict)")
    ap.add_argument("--text", type=Path, required=True, help="target-language lines")
    ap.add_argument("--lookups", type=int, default=100_000,
                    help="lookups timed (histories are reused in turn)")
    add_model_options(ap, threads=False)
    args = ap.parse_args(argv)
    from app.loader import load_vocab

    vocab = load_vocab(args.model)
    t0 = time.perf_counter()
    drafter = DictionaryDrafter.load(args.dict, vocab.identity())
    load_ms = (time.perf_counter() - t0) * 1000
    histories = []
    for line in read_lines(args.text):
        toks = vocab.tokenize(" " + line)
        histories.extend(toks[:i] for i in range(1, len(toks) + 1))
    times = []
    hits = 0
    for i in range(args.lookups):
        h = histories[i % len(histories)]
        s = time.perf_counter_ns()
        out = drafter.lookup(h)
        times.append((time.perf_counter_ns() - s) / 1000)
        hits += bool(out)
    q = statistics.quantiles(times, n=100)
    print(f"{args.dict.name}: {len(drafter)} entries, {args.dict.stat().st_size / 1e6:.2f} MB, "
          f"load {load_ms:.0f} ms; {args.lookups} lookups: p50 {q[49]:.2f} us, "
          f"p99 {q[98]:.2f} us, hit rate {hits / args.lookups:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
