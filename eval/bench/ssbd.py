"""``livetrans bench ssbd``: AR vs SSBD on FLORES lag-k streams (a preset of ``livetrans eval``).

    livetrans bench ssbd --flores-dir DIR --langs de,zh,ja --limit 50

Runs ``ar``, ``ssbd-b0`` and ``ssbd-b0.2`` (``--methods`` to change; flags such as
``+stopdraft`` or ``+biastail`` show the draft-end effects) interleaved per sentence, and
prints the harness tables: total decode time, output tokens/s, speedup over AR, A/D, A/O,
NE with and without the display mask, chrF of the final translations.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.usage import PlainHelp, add_model_options, comma_list, count
from eval import harness
from eval.datasets.flores import add_flores_options


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench ssbd", description=__doc__,
                                 formatter_class=PlainHelp)
    add_flores_options(ap, langs="de,zh,ja", limit=50)
    ap.add_argument("--lag", type=int, default=3,
                    help="words revealed per update of a lag-k stream")
    ap.add_argument("--mask-k", default="3", type=comma_list(count, "a whole number >= 0"),
                    help="comma-separated display-only mask-k values to score")
    ap.add_argument("--methods", default="ar,ssbd-b0,ssbd-b0.2",
                    help="comma-separated methods, e.g. ar,ssbd-b0.2+stopdraft")
    add_model_options(ap)
    ap.add_argument("--out", type=Path, default=Path("results/ssbd-bench"),
                    help="folder for records.jsonl, summary.json, tables.md and plots")
    args = ap.parse_args(argv)
    forwarded = ["--dataset", "flores", "--flores-dir", str(args.flores_dir), "--split",
                 args.split, "--langs", ",".join(args.langs), "--limit", str(args.limit), "--lag",
                 str(args.lag), "--mask-k", args.mask_k, "--methods", args.methods,
                 "--betas", "", "--out", str(args.out)]
    if args.model:
        forwarded += ["--model", args.model]
    if args.n_threads:
        forwarded += ["--n-threads", str(args.n_threads)]
    return harness.main(forwarded)


if __name__ == "__main__":
    raise SystemExit(main())
