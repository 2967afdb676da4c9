"""``livetrans bench-bus``: what sharing rooms on Redis costs (README "Scale-out").

    livetrans bench-bus --flores-dir eval/samples/flores_layout --sentences 3 \\
        --viewers 20 --out results/bus

Side by side in one run, on FLORES dev lag-3, closed loop (the speaker sends its next
update when its caption is in), one speaker into German with ``--viewers`` viewers:

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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import websockets

from app.usage import PlainHelp, add_model_options
from eval.datasets.flores import read_flores
from eval.datasets.streams import lag_k_stream
from eval.tables import Table, show, write_results


@dataclass
class BusRun:
    name: str
    updates: int = 0
    wall_s: float = 0.0
    finals: int = 0
    delays_same: list[float] = field(default_factory=list)  # ms, viewers on the speaker's
    delays_other: list[float] = field(default_factory=list)  # ms, on the other replica
    missed_finals: int = 0

    def summary(self) -> dict:
        def pct(xs: list[float], q: float) -> float | None:
            if not xs:
                return None
            xs = sorted(xs)
            return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)

        return {"name": self.name, "updates": self.updates,
                "ms_per_update": round(self.wall_s * 1000 / max(self.updates, 1), 1),
                "finals": self.finals,
                "delay_same_p50_ms": pct(self.delays_same, 0.5),
                "delay_same_p95_ms": pct(self.delays_same, 0.95),
                "delay_other_p50_ms": pct(self.delays_other, 0.5),
                "delay_other_p95_ms": pct(self.delays_other, 0.95),
                "viewer_frames": len(self.delays_same) + len(self.delays_other),
                "missed_finals": self.missed_finals}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(stack: ExitStack) -> str:
    """A throwaway ``redis-server`` on loopback, stopped when ``stack`` closes."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench-bus: no --room-bus given and no redis-server installed "
                         "(make system-deps installs it)")
    port = _free_port()
    workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="livetrans-redis-"))
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", workdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(proc.wait, 10)
    stack.callback(proc.terminate)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("bench-bus: redis-server did not start") from None
            time.sleep(0.05)
    return f"redis://127.0.0.1:{port}/0"


async def _viewer(url: str, seen: dict, joined: list) -> None:
    async with websockets.connect(url, max_size=None, open_timeout=120) as ws:
        first = json.loads(await ws.recv())
        if first.get("type") != "joined":
            raise RuntimeError(f"viewer refused: {first.get('code')}: {first.get('message')}")
        joined.append(1)
        async for raw in ws:
            frame = json.loads(raw)
            if frame.get("type") == "caption":
                seen[(frame["segment"], frame["revision"], frame["final"])] = \
                    time.perf_counter()


async def _all_joined(tasks: list[asyncio.Task], joined: list, limit_s: float = 120) -> None:
    """Wait until every viewer got ``joined``; a viewer that failed (refused, closed) or a
    join that takes longer than ``limit_s`` ends the run with the reason, never a hang."""
    deadline = time.perf_counter() + limit_s
    while len(joined) < len(tasks):
        failed = [t for t in tasks if t.done()]
        if failed:
            exc = failed[0].exception() if not failed[0].cancelled() else None
            raise RuntimeError(f"{len(failed)} of {len(tasks)} viewers ended before the talk "
                               f"began; the first: {type(exc).__name__}: {exc}")
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{len(tasks) - len(joined)} of {len(tasks)} viewers did not "
                               f"join within {limit_s:g} s")
        await asyncio.sleep(0.01)


async def _talk(speaker_url: str, viewer_urls: list[tuple[str, bool]],
                sentences: list[str], run: BusRun) -> None:
    room = "bench-" + uuid.uuid4().hex[:8]
    sent: dict = {}
    async with websockets.connect(f"{speaker_url}/v1/live", max_size=None,
                                  open_timeout=120) as ws:
        await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room}))
        ready = json.loads(await ws.recv())
        if ready.get("type") != "ready":
            raise RuntimeError(f"start refused: {ready}")
        views = [({}, same) for _, same in viewer_urls]
        joined: list = []
        tasks = [asyncio.create_task(_viewer(
            f"{url}/v1/live/watch?room={room}&lang=de", seen, joined))
            for (url, _), (seen, _) in zip(viewer_urls, views, strict=True)]
        try:
            await _all_joined(tasks, joined)
        except RuntimeError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        t0 = time.perf_counter()
        for seg, sentence in enumerate(sentences):
            for update in lag_k_stream(sentence, 3):
                kind = "final" if update.is_final else "partial"
                await ws.send(json.dumps({"type": kind, "segment": seg,
                                          "text": update.source}))
                run.updates += 1
                while True:
                    msg = json.loads(await ws.recv())
                    if msg["type"] in ("caption", "error"):
                        break
                if msg["type"] == "caption":
                    sent[(msg["segment"], msg["revision"], msg["final"])] = \
                        time.perf_counter()
        run.wall_s = time.perf_counter() - t0
        await ws.send(json.dumps({"type": "stop"}))
        async for raw in ws:
            if json.loads(raw)["type"] == "done":
                break
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
    run.finals = sum(1 for key in sent if key[2])
    for seen, same in views:
        for key, t in sent.items():
            if key in seen:
                (run.delays_same if same else run.delays_other).append((seen[key] - t) * 1000)
            elif key[2]:
                run.missed_finals += 1


def table(runs: list[BusRun]) -> Table:
    rows = []
    for r in runs:
        s = r.summary()
        rows.append([s["name"], s["updates"], s["ms_per_update"], s["finals"],
                     f"{s['delay_same_p50_ms']} / {s['delay_same_p95_ms']}",
                     f"{s['delay_other_p50_ms']} / {s['delay_other_p95_ms']}",
                     s["viewer_frames"], s["missed_finals"]])
    return Table(["run", "updates", "ms / update", "finals",
                  "viewer delay, same replica p50 / p95 ms",
                  "viewer delay, other replica p50 / p95 ms", "viewer frames",
                  "missed finals"], [[str(c) for c in row] for row in rows],
                 title="Rooms on a bus: the speaker's time and viewers' delay")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench-bus", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--flores-dir", type=Path, required=True, help="FLORES-200 folder")
    ap.add_argument("--sentences", type=int, default=3, help="FLORES dev sentences (3)")
    ap.add_argument("--viewers", type=int, default=20, help="viewers of the room (20)")
    ap.add_argument("--room-bus", default=None,
                    help="redis://host:port/db (default: start a redis-server on loopback)")
    ap.add_argument("--out", type=Path, default=None, help="folder for JSON and markdown")
    add_model_options(ap)
    args = ap.parse_args(argv)
    if args.viewers < 2:
        ap.error("--viewers: at least 2 (one on each replica)")
    from eval.local_server import LocalServer

    sentences = read_flores(args.flores_dir, "dev", "en")[: args.sentences]
    model = {"model": args.model} if args.model else {}
    runs: list[BusRun] = []
    with ExitStack() as stack:
        url = args.room_bus or start_redis(stack)
        data = stack.enter_context(tempfile.TemporaryDirectory(prefix="livetrans-bench-"))
        for name in ("one replica", "two replicas on Redis", "one replica (again)"):
            run = BusRun(name)
            with ExitStack() as servers:
                if name.startswith("two"):
                    a = servers.enter_context(LocalServer(room_bus=url, replica_id="a",
                                                          data_dir=Path(data), **model))
                    b = servers.enter_context(LocalServer(room_bus=url, replica_id="b",
                                                          data_dir=Path(data), **model))
                    viewers = [(a.url if i % 2 == 0 else b.url, i % 2 == 0)
                               for i in range(args.viewers)]
                else:
                    a = servers.enter_context(LocalServer(data_dir=Path(data), **model))
                    viewers = [(a.url, True)] * args.viewers
                ws = lambda u: u.replace("http://", "ws://")  # noqa: E731
                asyncio.run(_talk(ws(a.url), [(ws(u), same) for u, same in viewers],
                                  sentences, run))
            runs.append(run)
            print(json.dumps(run.summary()), flush=True)
    base = statistics.mean(r.wall_s / max(r.updates, 1) for r in runs if "one" in r.name)
    bus = next(r for r in runs if r.name.startswith("two"))
    ratio = (bus.wall_s / max(bus.updates, 1)) / base if base else float("nan")
    result = table(runs)
    show([result])
    print(f"speaker time per update, two replicas on Redis / one replica: {ratio:.3f}")
    if args.out:
        write_results(args.out, "bus", [*(r.summary() for r in runs),
                                        {"speaker_ratio": round(ratio, 3)}], result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
