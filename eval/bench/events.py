"""``livetrans bench events``: what fan-out and room viewers cost (README "Events").

    livetrans bench events --flores-dir eval/samples/flores_layout --sentences 3 \\
        --viewers 200 --out reports/2026-11-23-events

One in-process server (``eval.local_server.LocalServer``), FLORES dev lag-3, closed loop
(the speaker sends its next update when every language's caption of the previous one is
in). Two measurements:

* **viewers**: one speaker into 3 languages, with no viewers, then with ``--viewers`` idle
  viewers of its room connected (spread over the 3 languages; they read every frame,
  send nothing), then with none again (brackets the noise). Per run: engine time per
  caption (``stats.decode_ms``), wall time per source update, and the server's resident
  memory (``VmRSS`` of this process) before and after the viewers connected. The viewers
  run in a child process, so the memory difference is the server's side only.
* **fan-out**: one speaker into 1, 2, 3 languages (one update, every language in the same
  forward passes) against 1, 2, 3 separate single-language sessions sending the same
  stream at once: wall time per source update (each yields one caption per language).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.usage import PlainHelp, add_model_options, comma_list
from clients.live_session import LiveSession
from eval.datasets.flores import read_flores
from eval.datasets.streams import lag_k_stream
from eval.tables import Table, show, write_results

LANGS = ("de", "fr", "ja")


@dataclass
class Run:
    name: str
    langs: int
    sessions: int
    viewers: int = 0
    updates: int = 0  # source updates sent per session
    captions: int = 0
    wall_s: float = 0.0
    decode_ms: list[float] = field(default_factory=list)
    forward_passes: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    new_tokens: int = 0
    errors: int = 0
    rss_before_mb: float | None = None
    rss_after_mb: float | None = None
    viewer_frames: int | None = None

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("decode_ms")
        n = len(self.decode_ms)
        d["decode_ms_per_caption"] = round(sum(self.decode_ms) / n, 1) if n else None
        d["ms_per_update"] = round(self.wall_s * 1000 / self.updates, 1) if self.updates else None
        if self.rss_before_mb is not None and self.rss_after_mb is not None and self.viewers:
            d["rss_kb_per_viewer"] = round(
                (self.rss_after_mb - self.rss_before_mb) * 1024 / self.viewers, 1)
        return d


def rss_mb() -> float:
    """Resident memory of this process (the server runs in it), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def speaker(url: str, sentences: list[str], langs: list[str], run: Run,
                  room: str | None = None) -> None:
    """One speaker, closed loop: each update waits for its captions in every language."""
    start: dict = {"target_langs": langs}
    if room:
        start["room"] = room
    async with LiveSession(url) as live:
        await live.start(**start)
        for seg, sentence in enumerate(sentences):
            for update in lag_k_stream(sentence, 3):
                kind = "final" if update.is_final else "partial"
                await live.send_update(kind, update.source, segment=seg)
                run.updates += 1
                answered = 0
                while answered < len(langs):
                    msg = await live.recv()
                    if msg["type"] == "caption":
                        run.captions += 1
                        stats = msg["stats"]
                        run.decode_ms.append(stats["decode_ms"])
                        run.forward_passes += stats["forward_passes"]
                        run.draft_tokens += stats["draft_tokens"]
                        run.accepted_tokens += stats["accepted_tokens"]
                        run.new_tokens += stats["new_tokens"]
                        answered += 1
                    elif msg["type"] == "error":
                        run.errors += 1
                        answered += 1
        await live.stop()
        await live.until_done()


async def timed(coros: list, run: Run) -> None:
    t0 = time.perf_counter()
    await asyncio.gather(*coros)
    run.wall_s = time.perf_counter() - t0


VIEWER_CHILD = r"""
import asyncio, json, sys, websockets
url, n, langs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
frames = 0
async def one(i, joined):
    global frames
    async with websockets.connect(f"{url}&lang={langs[i % len(langs)]}", max_size=None,
                                  open_timeout=120) as ws:
        assert json.loads(await ws.recv())["type"] == "joined"
        joined.append(i)
        if len(joined) == n:
            print("joined", flush=True)
        async for raw in ws:
            frames += 1
async def main():
    joined = []
    await asyncio.gather(*(one(i, joined) for i in range(n)))
    print(json.dumps({"frames": frames}), flush=True)
asyncio.run(main())
"""


def viewers_run(url: str, ws_url: str, sentences: list[str], n: int, name: str) -> Run:
    """One 3-language speaker with ``n`` viewers of its room (in a child process)."""
    run = Run(name, len(LANGS), 1, viewers=n)
    room = "bench-" + uuid.uuid4().hex[:8]
    child = None
    run.rss_before_mb = rss_mb()
    if n:
        child = subprocess.Popen(
            [sys.executable, "-c", VIEWER_CHILD, f"{ws_url}/v1/live/watch?room={room}", str(n),
             ",".join(LANGS)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        if child.stdout.readline().strip() != "joined":
            raise RuntimeError("viewers did not join")
        time.sleep(1.0)  # let the server settle (allocator) before reading its memory
    run.rss_after_mb = rss_mb()
    asyncio.run(timed([speaker(url, sentences, list(LANGS), run, room)], run))
    if child is not None:
        assert child.stdout is not None
        out = child.stdout.readline()
        child.wait(60)
        run.viewer_frames = json.loads(out)["frames"] if out.strip() else None
    return run


def fanout_runs(url: str, sentences: list[str], ks: list[int]) -> list[Run]:
    runs = []
    for k in ks:
        langs = list(LANGS[:k])
        fan = Run(f"fan-out {k}", k, 1)
        asyncio.run(timed([speaker(url, sentences, langs, fan)], fan))
        runs.append(fan)
        print(line(fan), flush=True)
        sep = Run(f"separate {k}", k, k)
        per = [Run("", 1, 1) for _ in langs]
        asyncio.run(timed([speaker(url, sentences, [lang], r)
                           for lang, r in zip(langs, per, strict=True)], sep))
        sep.updates = per[0].updates
        sep.captions = sum(r.captions for r in per)
        sep.decode_ms = [d for r in per for d in r.decode_ms]
        sep.errors = sum(r.errors for r in per)
        for name in ("forward_passes", "draft_tokens", "accepted_tokens", "new_tokens"):
            setattr(sep, name, sum(getattr(r, name) for r in per))
        runs.append(sep)
        print(line(sep), flush=True)
    return runs


def line(run: Run) -> str:
    s = run.summary()
    extra = ""
    if run.viewers:
        extra = (f"  RSS {run.rss_before_mb:.1f} -> {run.rss_after_mb:.1f} MB "
                 f"({s.get('rss_kb_per_viewer')} KB/viewer), viewer frames {run.viewer_frames}")
    return (f"  {run.name:14} langs {run.langs} sessions {run.sessions} viewers "
            f"{run.viewers:<4} updates {run.updates:3}  {s['ms_per_update']} ms/update  "
            f"engine {s['decode_ms_per_caption']} ms/caption  passes {run.forward_passes} "
            f"tokens new {run.new_tokens} accepted {run.accepted_tokens}/{run.draft_tokens}  "
            f"errors {run.errors}{extra}")


def table(runs: list[Run]) -> Table:
    t = Table(["run", "languages", "sessions", "viewers", "source updates",
               "ms per update (wall)", "engine ms per caption", "RSS before / after (MB)",
               "errors"])
    for r in runs:
        s = r.summary()
        rss = (f"{r.rss_before_mb:.1f} / {r.rss_after_mb:.1f}"
               if r.rss_before_mb is not None and r.rss_after_mb is not None else "")
        t.add(r.name, r.langs, r.sessions, r.viewers, r.updates, s["ms_per_update"],
              s["decode_ms_per_caption"], rss, r.errors)
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench events", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--flores-dir", type=Path, required=True, help="FLORES-200 folder")
    ap.add_argument("--sentences", type=int, default=3, help="FLORES dev sentences (3)")
    ap.add_argument("--viewers", type=int, default=200, help="idle viewers (200)")
    ap.add_argument("--parts", default="viewers,fanout",
                    type=comma_list(choices=("viewers", "fanout")), help="viewers, fanout or both")
    ap.add_argument("--fanout", default="1,2,3", type=comma_list(int, "a whole number"),
                    help="languages per fan-out run (1,2,3)")
    add_model_options(ap)
    ap.add_argument("--out", type=Path, default=None, help="folder for JSON and markdown")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    ks = [int(k) for k in args.fanout.split(",") if k.strip()]
    if not ks or min(ks) < 1 or max(ks) > len(LANGS):
        ap.error(f"--fanout takes numbers of languages from 1 to {len(LANGS)}")
    sentences = read_flores(args.flores_dir, "dev", "en")[: args.sentences]
    from eval.local_server import LocalServer

    print(f"bench-events: {len(sentences)} FLORES dev sentences lag-3, languages "
          f"{', '.join(LANGS)}, {os.cpu_count()} CPUs", flush=True)
    runs: list[Run] = []
    with LocalServer(model=args.model, n_threads=args.n_threads, parallel=4,
                     live_max_viewers=max(args.viewers, 1) + 10,
                     live_max_viewers_per_room=max(args.viewers, 1) + 10,
                     max_queue_wait_s=3600, queue_size=1024, log_level="warning") as server:
        url = server.url.replace("http://", "ws://")
        warm = Run("warm-up", len(LANGS), 1)
        asyncio.run(speaker(url + "/v1/live", sentences[:1], list(LANGS), warm))
        if "viewers" in parts:
            for n, name in ((0, "no viewers"), (args.viewers, f"{args.viewers} viewers"),
                            (0, "no viewers again")):
                run = viewers_run(url + "/v1/live", url, sentences, n, name)
                runs.append(run)
                print(line(run), flush=True)
        if "fanout" in parts:
            runs += fanout_runs(url + "/v1/live", sentences, ks)
    print()
    show([table(runs)])
    if args.out is not None:
        write_results(args.out, "events", [r.summary() for r in runs], table(runs))
        print(f"\nwrote {args.out}/events.json, events.md")
    return 1 if any(r.errors for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
