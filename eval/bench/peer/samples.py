"""The sentences of ``llama-server-bench --live``: samples of FLORES dev and ACL 60/60 dev,
and the spread of a method's speedup over them.

Twenty sentences are too few to quote a speedup from (one run's ratio moved by ±0.1 at one
speaker), so ``--samples N`` takes N samples of ``--limit`` sentences from each dataset,
spread evenly over it from ``--offset`` on (FLORES, and ACL 60/60 when ``--acl-dir`` names
its folder), every method runs on each, and the spread table gives each method's speedup
pooled over them and its lowest, median and highest sample.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from eval.datasets.streams import Stream, lag_k_stream
from eval.tables import Table


@dataclass
class Sample:
    name: str  # "flores dev 100-119"
    streams: list[Stream]


def sample_offsets(n: int, offset: int, limit: int, samples: int) -> list[int]:
    """Where each of ``samples`` samples of ``limit`` items begins among ``n``: evenly spread
    from ``offset`` on, never past the end (fewer samples when the data is short)."""
    room = n - offset
    if room <= 0 or limit <= 0:
        return []
    if samples <= 1 or room < 2 * limit:
        return [offset]
    step = (room - limit) / (samples - 1)
    starts = [offset + round(k * step) for k in range(samples)]
    return sorted(dict.fromkeys(starts))


def make_samples(name: str, pairs: list[tuple[str, str]], offset: int, limit: int,
                 samples: int, lag: int) -> list[Sample]:
    pairs = [(s, r) for s, r in pairs if s.split()]
    out = []
    for start in sample_offsets(len(pairs), offset, limit, samples):
        chosen = pairs[start: start + limit]
        streams = [Stream(str(i), lag_k_stream(src, lag), reference=ref)
                   for i, (src, ref) in enumerate(chosen)]
        out.append(Sample(f"{name} {start}-{start + len(chosen) - 1}", streams))
    return out


def load_samples(args: argparse.Namespace, lang: str) -> list[Sample]:
    from eval.datasets.flores import read_flores_pair

    limit = args.limit if args.limit is not None else 20
    samples = make_samples(f"flores {args.split}",
                           read_flores_pair(args.flores_dir, args.split, "en", lang),
                           args.offset, limit, args.samples, args.lag)
    if getattr(args, "acl_dir", None) is not None:
        from eval.datasets.acl6060 import read_acl_pair

        samples += make_samples("acl dev", read_acl_pair(args.acl_dir, "dev", "en", lang),
                                0, limit, args.samples, args.lag)
    return samples


def add_sample_options(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--samples", type=int, default=1,
                       help="samples of --limit sentences from each dataset, spread evenly "
                            "over it; the spread table gives each method's speedup over them")
    group.add_argument("--acl-dir", type=Path, default=None,
                       help="ACL 60/60 folder (<split>/<lang>.txt): its dev set is sampled "
                            "as FLORES is")


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def spread_table(report: dict) -> Table:
    """Per file, speaker count and method: the speedup over llama-server pooled over every
    sample (the answered updates both sides have), and its lowest, median and highest
    sample; chrF's difference likewise."""
    groups: dict[tuple[str, int, str], list[dict]] = {}
    for (_, speakers), methods in report.items():
        for method, row in methods.items():
            groups.setdefault((row.get("file", ""), speakers, method), []).append(row)
    t = Table(["file", "speakers", "method", "samples", "errors", "speedup pooled",
               "speedup min / median / max", "chrF diff min / median / max"],
              title="Spread over the samples (speedup over updates both sides answered)")
    for (file, speakers, method), rows in groups.items():
        base = sum(r.get("common_base_ms", 0.0) for r in rows)
        mine = sum(r.get("common_ms", 0.0) for r in rows)
        ups = [r["speedup"] for r in rows if r.get("speedup")]
        diffs = [r["chrF_diff"][0] for r in rows if r.get("chrF_diff")]
        t.add(file, speakers, method, len(rows), sum(r["errors"] for r in rows),
              f"{base / mine:.3f}" if base and mine else "-",
              " / ".join(f"{v:.2f}" for v in spread(ups)) if ups else "-",
              " / ".join(f"{v:+.1f}" for v in spread(diffs)) if diffs else "-")
    return t
