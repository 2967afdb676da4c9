"""``livetrans bench bus``: what sharing rooms on Redis costs, and what Redis faults cost
(README "Scale-out").

    livetrans bench bus --flores-dir eval/samples/flores_layout --sentences 3 \\
        --viewers 20 --out results/bus
    livetrans bench bus --flores-dir eval/samples/flores_layout --sentences 3 \\
        --viewers 500 --faults none,kill,oom,pause,restart,foreign --out results/bus

Without ``--faults`` (or with ``--faults none``), side by side in one run, on FLORES dev
lag-3, closed loop (the speaker sends its next update when its caption is in), one speaker
into German with ``--viewers`` viewers:

* **one replica**: one in-process server without a bus (``LocalBus``), every viewer on it;
* **two replicas on Redis**: two in-process servers on one Redis (``--room-bus``, or a
  ``redis-server`` this bench starts on loopback), the speaker on the first, half of the
  viewers on each;
* **one replica** again, to bracket the noise.

Per run: the speaker's wall time per update (what the bus costs the speaker: it should be
nothing, since the bus never makes it wait), and each viewer's delay per caption frame:
when the viewer got it minus when the speaker got it (same process, one clock), split by
viewers on the speaker's replica and on the other one, plus finals a viewer missed.
Both servers and every client share this machine's cores, so read the ratios.

With faults (``--faults kill,oom,...``), one talk per fault, in the order given, on the
two-replica setup (the same two replicas for every talk; speaker on the first, viewers
split across both). After ``--fault-at`` of the talk's updates the fault is injected and
``--fault-s`` later it is healed; from the fault on, the rest of the talk is paced over
twice ``--fault-s`` (closed loop still), so about half of it falls in the fault, half after:

* ``none``: nothing happens (the baseline, paced the same way);
* ``kill``: ``CLIENT KILL TYPE normal`` and ``CLIENT KILL TYPE pubsub``, every second;
* ``oom``: ``CONFIG SET maxmemory 1`` (every write gets an OOM error reply), then back;
* ``pause``: SIGSTOP, then SIGCONT, to the bench's redis-server (with the default 7 s,
  longer than the clients' 5 s socket timeout);
* ``restart``: the bench's redis-server stopped, then started on the same port (it runs
  append-only in a temporary folder, so it comes back with its data);
* ``foreign``: junk of several shapes XADDed and PUBLISHed to the room's keys, every second.

Per fault: finals the speaker got; finals delivered to the viewers on each replica (of
finals x viewers); finals missed, duplicated or out of order (each viewer must see each
final once, in order); partial frames delivered; final-to-viewer latency p50/p99 (the
viewer's receive time minus the speaker's, one clock) for the finals the speaker got during
the fault and after it; the speaker's time per update during the fault; joins refused
(``room_bus_unavailable``, retried as a client should: the talk's viewers, then a batch of
probe viewers right after the talk, so a fault's after-effects count in its own row) and
viewers lost (closed without ``ended``); and memory: the RSS of this process (both
replicas and every client run in it) before and after the talk and its peak during it.
Viewers connect ``JOIN_BATCH`` at a time. ``pause`` and ``restart`` need the bench's own
redis-server, and faults are injected only into a Redis on loopback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from app.usage import PlainHelp, add_model_options
from eval.bench.bus.faults import (
    FAULTS,
    FaultInjector,
    Plan,
    check_fault_target,
    parse_faults,
    start_redis,
)
from eval.bench.bus.results import (
    BusRun,
    FaultRun,
    allow_open_files,
    fault_table,
    legacy_run,
    maxrss_mb,
    table,
)
from eval.bench.bus.talk import JOIN_BATCH, run_talk, settle
from eval.bench.events import rss_mb
from eval.datasets.flores import read_flores
from eval.redis_process import RedisProcess
from eval.tables import show, write_results


# -- runs ----------------------------------------------------------------------------------
def _ws(url: str) -> str:
    return url.replace("http://", "ws://")


def _split(a: Any, b: Any, viewers: int) -> list[tuple[str, bool]]:
    """Viewers alternately on the speaker's replica ``a`` and on ``b``."""
    return [(_ws(a.url if i % 2 == 0 else b.url), i % 2 == 0) for i in range(viewers)]


def run_comparison(url: str, data: Path, sentences: list[str], viewers: int,
                   model: dict) -> list[BusRun]:
    """One replica, two replicas on Redis, one replica again (no faults)."""
    from eval.local_server import LocalServer

    runs: list[BusRun] = []
    for name in ("one replica", "two replicas on Redis", "one replica (again)"):
        with ExitStack() as servers:
            if name.startswith("two"):
                a = servers.enter_context(LocalServer(room_bus=url, replica_id="a",
                                                      data_dir=data, **model))
                b = servers.enter_context(LocalServer(room_bus=url, replica_id="b",
                                                      data_dir=data, **model))
                urls = _split(a, b, viewers)
            else:
                a = servers.enter_context(LocalServer(data_dir=data, **model))
                urls = [(_ws(a.url), True)] * viewers
            run = legacy_run(name, asyncio.run(run_talk(_ws(a.url), urls, sentences)))
        runs.append(run)
        print(json.dumps(run.summary()), flush=True)
    return runs


def _skipped(*servers: Any) -> int:
    return sum(int(getattr(s.state.bus, "skipped", 0)) for s in servers)


def run_faults(url: str, process: RedisProcess | None, data: Path, sentences: list[str],
               args: argparse.Namespace, model: dict) -> list[FaultRun]:
    """One talk per fault on the same two replicas, the speaker on ``a``."""
    from eval.local_server import LocalServer

    runs: list[FaultRun] = []
    with ExitStack() as servers:
        a = servers.enter_context(LocalServer(room_bus=url, replica_id="a", data_dir=data,
                                              **model))
        b = servers.enter_context(LocalServer(room_bus=url, replica_id="b", data_dir=data,
                                              **model))
        # a first talk pays for warming up: not the baseline's to carry
        asyncio.run(run_talk(_ws(a.url), [], sentences[:1]))
        for kind in args.faults:
            run = FaultRun(kind, args.viewers, rss_before_mb=rss_mb())
            skipped = _skipped(a, b)
            plan = Plan(FaultInjector(kind, url, process), args.fault_at, args.fault_s)
            talk = asyncio.run(run_talk(_ws(a.url), _split(a, b, args.viewers), sentences, plan))
            run.record(talk)
            run.refused_after = asyncio.run(settle(
                [url for url, _ in _split(a, b, 2 * min(JOIN_BATCH, args.viewers))]))
            run.rss_after_mb, run.maxrss_mb = rss_mb(), maxrss_mb()
            run.skipped = _skipped(a, b) - skipped
            runs.append(run)
            print(json.dumps(run.summary()), flush=True)
    return runs


# -- command line --------------------------------------------------------------------------


# -- command line --------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="livetrans bench bus", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--flores-dir", type=Path, required=True, help="FLORES-200 folder")
    ap.add_argument("--sentences", type=int, default=3, help="FLORES dev sentences (3)")
    ap.add_argument("--viewers", type=int, default=20, help="viewers of the room (20)")
    ap.add_argument("--room-bus", default=None,
                    help="redis://host:port/db (default: start a redis-server on loopback)")
    ap.add_argument("--faults", type=parse_faults, default="none",
                    help=f"comma-separated, one talk each: {', '.join(FAULTS)} (none: the "
                         "one / two / one replica comparison)")
    ap.add_argument("--fault-at", type=float, default=0.3,
                    help="share of the talk's updates sent before the fault")
    ap.add_argument("--fault-s", type=float, default=7.0,
                    help="seconds each fault lasts (a pause should outlast the clients' "
                         "5 s socket timeout)")
    ap.add_argument("--out", type=Path, default=None, help="folder for JSON and markdown")
    add_model_options(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.viewers < 2:
        ap.error("--viewers: at least 2 (one on each replica)")
    faulty = any(f != "none" for f in args.faults)
    if faulty and not 0 < args.fault_at < 1:
        ap.error("--fault-at: a share of the talk, between 0 and 1")
    if faulty and not 0 < args.fault_s <= 60:
        ap.error("--fault-s: more than 0 and at most 60 seconds")
    refusal = check_fault_target(args.faults, args.room_bus)
    if refusal:
        ap.error(refusal)
    allow_open_files(args.viewers)
    sentences = read_flores(args.flores_dir, "dev", "en")[: args.sentences]
    model = {"model": args.model} if args.model else {}
    with ExitStack() as stack:
        process = None if args.room_bus else start_redis(stack)
        url = args.room_bus or process.url
        data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="livetrans-bench-")))
        if not faulty:
            return report_comparison(
                run_comparison(url, data, sentences, args.viewers, model), args.out)
        runs = run_faults(url, process, data, sentences, args, model)
    result = fault_table(runs, args.viewers)
    show([result])
    if args.out:
        write_results(args.out, "bus_faults", [r.summary() for r in runs], result)
    return 0


def report_comparison(runs: list[BusRun], out: Path | None) -> int:
    base = statistics.mean(r.wall_s / max(r.updates, 1) for r in runs if "one" in r.name)
    bus = next(r for r in runs if r.name.startswith("two"))
    ratio = (bus.wall_s / max(bus.updates, 1)) / base if base else float("nan")
    result = table(runs)
    show([result])
    print(f"speaker time per update, two replicas on Redis / one replica: {ratio:.3f}")
    if out:
        write_results(out, "bus", [*(r.summary() for r in runs),
                                   {"speaker_ratio": round(ratio, 3)}], result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
