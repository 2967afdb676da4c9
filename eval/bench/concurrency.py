"""``livetrans bench concurrency``: C concurrent live streams, ``--parallel 1`` vs ``--parallel C``.

    livetrans bench concurrency --flores-dir eval/samples/flores_layout \\
        --asr-file eval/samples/asr_sample_en.jsonl --concurrency 1,2,4,8

One run, one machine, both configurations side by side: for every C a real server with one
sequence (``--parallel 1``: one generation at a time, the baseline) and a real server with
C sequences (every stream's update in the same forward passes), each fed C WebSocket
streams at once, alternately (``--repeats`` times each; figures pooled). Two modes:

* ``closed``: FLORES dev lag-3, one sentence per stream, closed loop (each stream sends its
  next update when the previous caption arrived): a throughput measurement.
* ``asr``: ASR partial streams replayed in real time (the recorded timestamps): what
  speakers see; final -> caption latency is the figure that matters.

Printed per C and mode: wall time, updates/s, output tokens/s, the throughput ratio
(parallel C over parallel 1) and the time from a final's sending to its caption (p50/p99).
``--out`` also writes the figures as JSON and a plot.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from app.usage import PlainHelp, add_model_options, comma_list, positive_int
from clients.live_session import LiveSession, LiveSessionRefused
from eval.datasets.asr_partials import read_asr_streams
from eval.datasets.flores import read_flores
from eval.datasets.streams import Stream, Update, lag_k_stream
from eval.metrics.speed import percentile
from eval.plots import save
from eval.tables import Table, show, write_results


@dataclass
class RunFigures:
    mode: str
    concurrency: int
    parallel: int
    wall_s: float = 0.0
    updates: int = 0  # captions received
    output_tokens: int = 0
    final_latency_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lost_finals: int = 0
    steps: int = 0  # forward passes of the server during the run

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.wall_s if self.wall_s else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s else 0.0

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("final_latency_ms")
        d.update(updates_per_s=round(self.updates_per_s, 3),
                 tokens_per_s=round(self.tokens_per_s, 2),
                 final_p50_ms=_round(percentile(self.final_latency_ms, 50)),
                 final_p99_ms=_round(percentile(self.final_latency_ms, 99)),
                 finals=len(self.final_latency_ms))
        return d


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


async def _stream(url: str, stream: Stream, lang: str, closed_loop: bool, speed: float,
                  figures: RunFigures) -> None:
    """One speaker: sends the stream's updates, reads captions until 'done'."""
    async with LiveSession(url) as live:
        try:
            await live.start(target_lang=lang)
        except LiveSessionRefused as refused:
            code = str(refused.frame.get("code", "refused"))
            figures.errors[code] = figures.errors.get(code, 0) + 1
            return
        caption = asyncio.Event()
        sent_final: dict[int, float] = {}
        captioned: set[int] = set()

        async def reader() -> None:
            async for msg in live.frames():
                if msg["type"] == "caption":
                    figures.updates += 1
                    stats = msg.get("stats", {})
                    figures.output_tokens += stats.get("accepted_tokens", 0) + \
                        stats.get("new_tokens", 0)
                    if msg["final"] and msg["segment"] in sent_final:
                        captioned.add(msg["segment"])
                        figures.final_latency_ms.append(
                            (time.perf_counter() - sent_final[msg["segment"]]) * 1000)
                    caption.set()
                elif msg["type"] == "error":
                    code = msg.get("code", "?")
                    figures.errors[code] = figures.errors.get(code, 0) + 1
                    caption.set()
                elif msg["type"] == "done":
                    return

        task = asyncio.create_task(reader())
        start = time.perf_counter()
        for update in stream.updates:
            if closed_loop:
                caption.clear()
            elif update.t is not None:
                delay = start + update.t / speed - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            kind = "final" if update.is_final else "partial"
            await live.send_update(kind, update.source, segment=0)
            if update.is_final:
                sent_final[0] = time.perf_counter()
            if closed_loop:
                await caption.wait()
        await live.stop()
        await task
        figures.lost_finals += len(set(sent_final) - captioned)


async def _run_streams(url: str, streams: list[Stream], lang: str, closed_loop: bool,
                       speed: float, figures: RunFigures) -> None:
    t0 = time.perf_counter()
    await asyncio.gather(*(_stream(url, s, lang, closed_loop, speed, figures)
                           for s in streams))
    figures.wall_s = time.perf_counter() - t0


def closed_loop_streams(sentences: list[str], lag: int) -> list[Stream]:
    return [Stream(id=str(i), updates=lag_k_stream(s, lag)) for i, s in enumerate(sentences)]


def asr_streams(streams: list[Stream], max_seconds: float) -> list[Stream]:
    """Each ASR utterance cut to its first ``max_seconds`` (the last kept update becomes the
    final), so a run's length is bounded."""
    out = []
    for s in streams:
        kept = [u for u in s.updates if u.t is None or u.t <= max_seconds] or s.updates[:1]
        last = kept[-1]
        kept[-1] = Update(last.source, True, last.t)
        out.append(Stream(id=s.id, updates=kept, reference=s.reference))
    return out


def _server(parallel: int, args: argparse.Namespace):  # noqa: ANN202
    from eval.local_server import LocalServer

    # the server's own default unless the run names one
    crowded = {} if args.crowded_proposals is None else \
        {"crowded_proposals": args.crowded_proposals}
    return LocalServer(parallel=parallel, n_threads=args.n_threads, model=args.model,
                       final_steps=args.final_steps, **crowded,
                       max_live_sessions=1024, live_max_connections=1024, queue_size=4096,
                       max_queue_wait_s=3600, log_level="warning")


def _run_once(server, parallel: int, c: int, mode: str, data: dict,
              args: argparse.Namespace) -> RunFigures:
    url = server.url.replace("http://", "ws://") + "/v1/live"
    engine = server.state.backend.worker.engine
    figures = RunFigures(mode, c, parallel)
    passes = engine.forward_passes
    asyncio.run(_run_streams(url, data[mode][:c], args.lang, mode == "closed", args.speed,
                             figures))
    figures.steps = engine.forward_passes - passes
    print(_line(figures), flush=True)
    return figures


def run_all(concurrencies: list[int], modes: list[str], data: dict,
            args: argparse.Namespace) -> list[RunFigures]:
    """Every configuration's server up at once; for each C and mode the baseline and the
    method run alternately, ``--repeats`` times each (so drift in the machine's load hits
    both), and their figures are pooled."""
    from contextlib import ExitStack

    parallels = sorted({1, *concurrencies})
    out: list[RunFigures] = []
    with ExitStack() as stack:
        servers = {p: stack.enter_context(_server(p, args)) for p in parallels}
        for p, server in servers.items():  # warm-up: one sentence each
            url = server.url.replace("http://", "ws://") + "/v1/live"
            asyncio.run(_run_streams(url, data["closed"][:1], args.lang, True, 1.0,
                                     RunFigures("warmup", 1, p)))
        for c in concurrencies:
            for mode in modes:
                configs = [1] if c == 1 else [1, c]
                runs: dict[int, list[RunFigures]] = {p: [] for p in configs}
                for r in range(args.repeats):
                    order = configs if r % 2 == 0 else configs[::-1]
                    for p in order:
                        runs[p].append(_run_once(servers[p], p, c, mode, data, args))
                out += [_pool(rs) for rs in runs.values()]
    return out


def _pool(runs: list[RunFigures]) -> RunFigures:
    """Repeats of one configuration as one: summed work and time, pooled latencies."""
    first = runs[0]
    pooled = RunFigures(first.mode, first.concurrency, first.parallel)
    for r in runs:
        pooled.wall_s += r.wall_s
        pooled.updates += r.updates
        pooled.output_tokens += r.output_tokens
        pooled.final_latency_ms += r.final_latency_ms
        pooled.lost_finals += r.lost_finals
        pooled.steps += r.steps
        for k, v in r.errors.items():
            pooled.errors[k] = pooled.errors.get(k, 0) + v
    return pooled


def _line(f: RunFigures) -> str:
    s = f.summary()
    return (f"  {f.mode:6} C={f.concurrency:<2} parallel={f.parallel:<2} wall {f.wall_s:6.1f} s"
            f"  {s['updates_per_s']:6.2f} upd/s  {s['tokens_per_s']:7.1f} tok/s  "
            f"final p50 {s['final_p50_ms']} ms p99 {s['final_p99_ms']} ms  "
            f"steps {f.steps}  errors {f.errors or 0}  lost {f.lost_finals}")


def table(results: list[RunFigures]) -> Table:
    """Per mode and C, parallel 1 against parallel C side by side."""
    t = Table(["mode", "C", "wall p1 / pC (s)", "updates/s p1 / pC", "tok/s p1 / pC",
               "throughput ratio", "final p50 p1 / pC (ms)", "final p99 p1 / pC (ms)"])
    by = {(r.mode, r.concurrency, r.parallel): r for r in results}
    for mode in dict.fromkeys(r.mode for r in results):
        for c in sorted({r.concurrency for r in results if r.mode == mode}):
            base, par = by.get((mode, c, 1)), by.get((mode, c, c))
            if base is None or par is None:
                continue
            b, p = base.summary(), par.summary()
            ratio = p["updates_per_s"] / b["updates_per_s"] if b["updates_per_s"] else 0.0
            t.add(mode, c, f"{base.wall_s:.1f} / {par.wall_s:.1f}",
                  f"{b['updates_per_s']:.2f} / {p['updates_per_s']:.2f}",
                  f"{b['tokens_per_s']:.1f} / {p['tokens_per_s']:.1f}", f"{ratio:.2f}x",
                  f"{b['final_p50_ms']} / {p['final_p50_ms']}",
                  f"{b['final_p99_ms']} / {p['final_p99_ms']}")
    return t


def plot(results: list[RunFigures], lang: str, repeats: int) -> Figure:
    """Updates per second by concurrent streams C, ``--parallel 1`` against ``--parallel
    C``, one panel per mode; each point is C streams (times ``repeats`` runs, pooled)."""
    modes = list(dict.fromkeys(r.mode for r in results))
    data = {"closed": "FLORES dev, closed loop", "asr": "ASR replay"}
    fig = Figure(figsize=(5.5 * len(modes), 4.2))
    axes = fig.subplots(1, len(modes), squeeze=False)[0]
    for ax, mode in zip(axes, modes, strict=True):
        for label, same in (("--parallel 1", False), ("--parallel C", True)):
            pts = sorted((r.concurrency, r.updates_per_s) for r in results
                         if r.mode == mode and (r.parallel == r.concurrency) == same
                         and (same or r.parallel == 1))
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=label)
        ax.set_title(f"{data.get(mode, mode)} en→{lang}: updates/s by C", fontsize=10)
        ax.set_xlabel("concurrent streams C")
        ax.set_ylabel("updates per second")
        ax.set_xlim(left=0, right=max(r.concurrency for r in results) + 1)
        ax.set_ylim(bottom=0)
        ax.text(0.99, 0.02, f"n = C streams per point, {repeats} run(s) pooled",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8, color="dimgray")
        ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench concurrency", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--flores-dir", type=Path, help="FLORES-200 folder (closed mode)")
    ap.add_argument("--asr-file", type=Path, help="ASR partial streams JSONL (asr mode)")
    ap.add_argument("--modes", default="closed,asr", type=comma_list(choices=("closed", "asr")),
                    help="closed, asr or both (default)")
    ap.add_argument("--concurrency", default="1,2,4,8",
                    type=comma_list(positive_int, "a positive whole number"),
                    help="C values (default 1,2,4,8)")
    ap.add_argument("--lang", default="de", help="target language (default de)")
    ap.add_argument("--lag", type=int, default=3, help="words per update, closed mode (3)")
    ap.add_argument("--asr-seconds", type=float, default=20.0,
                    help="replay at most this much of each ASR utterance (default 20)")
    ap.add_argument("--speed", type=float, default=1.0, help="ASR replay speed (1 = real time)")
    add_model_options(ap)
    ap.add_argument("--crowded-proposals", type=int, default=None,
                    help="the server's --crowded-proposals (default: the server's)")
    ap.add_argument("--final-steps", default="lead", choices=["lead", "alone", "shared"],
                    help="the server's --final-steps (default lead)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each configuration, alternating baseline and method")
    ap.add_argument("--out", type=Path, default=None, help="folder for JSON, table and plot")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not set(modes) <= {"closed", "asr"}:
        ap.error("--modes takes closed, asr or both")
    conc = sorted({int(c) for c in args.concurrency.split(",") if c.strip()})
    if not conc or min(conc) < 1:
        ap.error("--concurrency takes positive integers, e.g. 1,2,4,8")
    need = max(conc)
    data: dict[str, list[Stream]] = {}
    if args.flores_dir is None:
        ap.error("--flores-dir is needed (the warm-up and the closed mode use FLORES dev)")
    data["closed"] = closed_loop_streams(read_flores(args.flores_dir, "dev", "en")[:need],
                                         args.lag)
    if "asr" in modes:
        data["asr"] = asr_streams(read_asr_streams(args.asr_file, limit=need),
                                  args.asr_seconds)
    print(f"bench-concurrency: C in {conc}, modes {modes}, target {args.lang}, "
          f"{os.cpu_count()} CPUs", flush=True)
    results = run_all(conc, modes, data, args)
    print()
    show([table(results)])
    if args.out is not None:
        write_results(args.out, "concurrency", [r.summary() for r in results], table(results))
        save(plot(results, args.lang, args.repeats), args.out / "concurrency.png", dpi=120)
        print(f"\nwrote {args.out}/concurrency.json, concurrency.md, concurrency.png")
    lost = sum(r.lost_finals for r in results)
    return 1 if lost else 0
