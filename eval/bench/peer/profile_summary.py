"""Read a py-spy speedscope profile as text: per thread, where its samples were.

    python -m eval.bench.peer.profile_summary PROFILE.json[.gz] [--top 25]

``llama-server-bench --live --profile DIR`` records the livetrans server with py-spy
(speedscope format, native frames); speedscope.app draws one, this prints the frames that
hold the most samples of each thread (inclusive share, then the leaf frames' own share),
which is what the closing notes and docs/llama-server.md quote.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from pathlib import Path

from app.usage import PlainHelp, require_file


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def frame_name(frame: dict) -> str:
    where = Path(frame.get("file") or "").name
    return f"{frame['name']} ({where})" if where else frame["name"]


def summarize(profile: dict, top: int = 25, min_samples: int = 20) -> list[dict]:
    """Per thread with at least ``min_samples`` samples: its sample count, the ``top``
    frames by inclusive share and by own (leaf) share."""
    frames = profile["shared"]["frames"]
    threads = []
    for thread in profile["profiles"]:
        samples = thread.get("samples") or []
        if len(samples) < min_samples:
            continue
        inclusive: Counter[str] = Counter()
        own: Counter[str] = Counter()
        for stack in samples:
            names = {frame_name(frames[i]) for i in stack}
            inclusive.update(names)
            if stack:
                own[frame_name(frames[stack[-1]])] += 1
        n = len(samples)
        threads.append({
            "thread": thread.get("name", "?"), "samples": n,
            "inclusive": [(name, round(100 * c / n, 1)) for name, c in inclusive.most_common(top)],
            "own": [(name, round(100 * c / n, 1)) for name, c in own.most_common(top)],
        })
    return threads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.bench.peer.profile_summary",
                                 description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("profile", type=Path, help="a speedscope JSON file (or .json.gz)")
    ap.add_argument("--top", type=int, default=25, help="frames shown per list")
    args = ap.parse_args(argv)
    for t in summarize(load(require_file(args.profile, "profile")), args.top):
        print(f"{t['thread']}: {t['samples']} samples")
        print("  inclusive:")
        for name, share in t["inclusive"]:
            print(f"    {share:5.1f}%  {name}")
        print("  own:")
        for name, share in t["own"]:
            print(f"    {share:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
