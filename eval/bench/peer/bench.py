"""llama.cpp's own server on two GGUF files, side by side: re-translation from scratch (AR)
of FLORES lag-k streams, the way any server without SSBD serves live captions. With
``--live``, livetrans itself against llama-server instead (``eval.bench.peer.live``).

    livetrans bench peer --llama-server PATH/llama-server --flores-dir DIR \\
        --model-b TRIMMED.gguf --langs de --limit 20

Both servers run at once on loopback ports, but requests alternate (one server works at a
time), update by update, so machine noise hits both alike. Every update sends the
project's few-shot prompt (``app.translation.prompts``) to ``/completion``, greedy, stopping at the
newline, with the prompt cache on (as a caption server would run llama-server). Prints
output tokens/s of each model, the ratio, and chrF of the finals. llama-server is not part
of livetrans: build it from llama.cpp's source, which the ``llama-cpp-python`` source
package carries (docs/llama-server.md says how).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.model_files import resolve_model_path
from app.translation.prompts import FewShotFormat
from app.usage import PlainHelp, UsageError, require_file
from eval.bench.peer.live import (
    ServerProcess,
    add_live_options,
    breakdown_table,
    check_live_options,
    run_live,
    speed_table,
    spread_table,
    write_live,
)
from eval.bench.peer.servers import llama_server
from eval.datasets.flores import add_flores_options, read_flores_pair
from eval.datasets.streams import lag_k_stream
from eval.metrics.quality import ChrF, paired_chrf_difference
from eval.tables import show


@dataclass
class ModelRun:
    """What one model's server did: generated tokens, generation time, finals."""

    name: str
    tokens: int = 0
    predicted_ms: float = 0.0
    wall_s: float = 0.0
    finals: list[str] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s else 0.0


def summary(a: ModelRun, b: ModelRun, refs: list[str]) -> dict:
    """The side-by-side figures (``b`` against ``a``)."""
    delta, low, high = paired_chrf_difference(a.finals, b.finals, refs)
    return {
        a.name: {"tokens": a.tokens, "wall_s": round(a.wall_s, 2),
                 "tokens_per_s": round(a.tokens_per_s, 1),
                 "chrF": round(ChrF().corpus_score(a.finals, refs).score, 1)},
        b.name: {"tokens": b.tokens, "wall_s": round(b.wall_s, 2),
                 "tokens_per_s": round(b.tokens_per_s, 1),
                 "chrF": round(ChrF().corpus_score(b.finals, refs).score, 1)},
        "speedup_wall": round(a.wall_s / b.wall_s, 3) if b.wall_s else None,
        "speedup_tokens_per_s": round(b.tokens_per_s / a.tokens_per_s, 3)
        if a.tokens_per_s else None,
        "chrF_diff": [round(delta, 1), round(low, 1), round(high, 1)],
        "identical_finals": sum(x == y for x, y in zip(a.finals, b.finals, strict=True)),
        "finals": len(refs),
    }


def complete(server: ServerProcess, prompt: str, max_tokens: int) -> tuple[str, int, float]:
    """One greedy ``/completion`` on llama-server: (text, tokens generated, their ms)."""
    resp = httpx.post(f"{server.url}/completion", timeout=300, json={
        "prompt": prompt, "n_predict": max_tokens, "temperature": 0.0, "top_k": 1,
        "stop": ["\n"], "cache_prompt": True})
    resp.raise_for_status()
    data = resp.json()
    timings = data.get("timings", {})
    return data["content"], int(timings.get("predicted_n", 0)), \
        float(timings.get("predicted_ms", 0.0))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench peer", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--llama-server", type=Path, required=True,
                    help="the llama-server binary (built from llama.cpp's source)")
    ap.add_argument("--model-a", default=None, help="first GGUF (default: the bundled model)")
    ap.add_argument("--model-b", default=None,
                    help="second GGUF, e.g. a trimmed model (required without --live)")
    add_flores_options(ap, langs="de", limit=20)
    ap.add_argument("--offset", type=int, default=0, help="sentences skipped first")
    ap.add_argument("--lag", type=int, default=3, help="words revealed per update")
    ap.add_argument("--threads", type=int, default=None, help="llama-server -t")
    ap.add_argument("--max-tokens", type=int, default=256, help="most tokens per update")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    add_live_options(ap)
    args = ap.parse_args(argv)
    binary = args.llama_server = require_file(args.llama_server, "--llama-server")
    if args.live:
        check_live_options(args)
        if args.open_loop:
            from eval.bench.peer.open_loop import capacity_table, latency_table, run_open_loop

            about, report = run_open_loop(args)
            show([*about, latency_table(report),
                  capacity_table(report, args.partial_bound, args.final_bound),
                  breakdown_table(report)])
        else:
            about, report = run_live(args)
            show([*about, speed_table(report), *([spread_table(report)]
                                                 if args.samples > 1 or args.acl_dir else []),
                  breakdown_table(report)])
        if args.json:
            write_live(report, args.json, about)
        return 0
    if args.model_b is None:
        raise UsageError("--model-b names the second GGUF (or use --live)")
    models = [resolve_model_path(args.model_a), resolve_model_path(args.model_b)]
    fmt = FewShotFormat()
    report = {}
    servers = [llama_server(binary, m, 1, args.threads, 2048) for m in models]
    try:
        for s in servers:
            s.ready(120)
        for lang in args.langs:
            pairs = read_flores_pair(args.flores_dir, args.split, "en", lang)
            pairs = pairs[args.offset: args.offset + args.limit]
            runs = [ModelRun("a:" + models[0].name), ModelRun("b:" + models[1].name)]
            for source, _ in pairs:
                for update in lag_k_stream(source, args.lag):
                    prompt = fmt.translation(update.source, "en", lang).text
                    for server, run in zip(servers, runs, strict=True):
                        t0 = time.perf_counter()
                        text, n, _ = complete(server, prompt, args.max_tokens)
                        run.wall_s += time.perf_counter() - t0
                        run.tokens += n
                        if update.is_final:
                            run.finals.append(text.strip())
            report[lang] = summary(runs[0], runs[1], [ref for _, ref in pairs])
            print(json.dumps({lang: report[lang]}, ensure_ascii=False))
    finally:
        for s in servers:
            s.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
