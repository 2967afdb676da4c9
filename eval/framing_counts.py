"""Framing in an eval run's captions, by kind: what an instruction model wrapped round its
translations (method ``+noclean``: the answers as decoded) and what is left once they are
cleaned (the default methods), for docs/instruct-models.md.

    python -m eval.framing_counts results/flores_smollm results/acl_smollm

The harness's own pathology column names one kind per final, ``loop`` first: a final that
ran into the length cap *and* carried a label counts as a loop there. Here every kind an
output shows is counted (``app.translation.framing``: the kinds ``clean_framing`` takes off
plus the one ``find_framing`` still finds), for finals and for partials.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

from app.translation.framing import clean_framing, cut_framing, find_framing, held_back

KINDS = ("label", "quotes", "restated_source", "commentary")


def framing_kinds(text: str, source: str) -> set[str]:
    """Every kind of framing ``text`` shows as a caption of ``source``."""
    kinds = set(clean_framing(text, source).removed)
    found = find_framing(text, source)
    if found is not None:
        kinds.add(found.kind)
    return kinds


def shown_partial(record: dict) -> str:
    """What a viewer is shown of a partial's text: as decoded with ``+noclean``, else cut
    where remaining framing starts and held back while it may still grow into framing
    (``run_update``, applied to the recorded answer)."""
    if "noclean" in record["method"].split("@")[0].split("+"):
        return record["text"]
    return held_back(cut_framing(record["text"], record["source"]), record["source"],
                     record["lang"])


def count(records: list[dict]) -> dict[str, dict]:
    """Per method: finals and partials, how many show framing, and by kind."""
    out: dict[str, dict] = defaultdict(lambda: {"finals": 0, "framed_finals": 0,
                                                "partials": 0, "framed_partials": 0,
                                                "shown_framed_partials": 0,
                                                "finals_by_kind": Counter()})
    for r in records:
        row = out[r["method"]]
        kinds = framing_kinds(r["text"], r["source"])
        if r["final"]:
            row["finals"] += 1
            row["framed_finals"] += bool(kinds)
            row["finals_by_kind"].update(kinds)
        else:
            row["partials"] += 1
            row["framed_partials"] += bool(kinds)
            row["shown_framed_partials"] += bool(framing_kinds(shown_partial(r), r["source"]))
    return out


def _lines(run: Path) -> list[str]:
    """The records of a run folder: ``records.jsonl``, or gzipped as reports keeps it."""
    plain = run / "records.jsonl"
    if plain.exists():
        return plain.read_text(encoding="utf-8").splitlines()
    return gzip.decompress((run / "records.jsonl.gz").read_bytes()).decode().splitlines()


def table(runs: list[Path]) -> str:
    lines = ["| run | method | finals with framing | label | quotes | restated source | "
             "commentary | partials with framing (answer / shown) |",
             "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        records = [json.loads(line) for line in _lines(run)]
        for method, row in sorted(count(records).items()):
            by = row["finals_by_kind"]
            lines.append(
                f"| {run.name} | {method} | {row['framed_finals']}/{row['finals']} | "
                + " | ".join(str(by[k]) for k in KINDS)
                + f" | {row['framed_partials']} / {row['shown_framed_partials']} of "
                  f"{row['partials']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="eval output folders (records.jsonl)")
    print(table(ap.parse_args(argv).runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
