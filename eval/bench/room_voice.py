"""The room's voice for listeners: how long after a speaker stops does a listener hear the
translation, what one replica holds, and what a listener costs on the wire.

    livetrans bench room-voice [--rooms 1,2] [--listeners 1,20] [--sentences 4]
                               [--source en --target de] [--out results/room-voice]

A real server (``livetrans serve`` in a subprocess: its CPU is its own) with the server's
voices. Per room, one speaker on ``/v1/live`` speaks espeak-ng sentences in ``--source``
(audio input, real time, the room's voice in ``--target``, append-only text) and
``--listeners`` WHEP listeners (``clients.room_listener``, aiortc, as a phone's page) hear
the room. Rooms start ``--stagger-s`` apart. Each pair of counts (rooms x listeners) is one
run on the same server.

Per sentence and listener, from the moment the 200 ms frame carrying the sentence's last
sample was sent (speech end), on the wall clock:

* first commit: the sentence's first ``commit`` frame on the speaker's socket (append-only
  text commits from partials: it can come before the end, then it is negative);
* speaker hears: the first voiced audio on the speaker's own socket after that commit (the
  voice, without the room);
* listener hears: the first voiced audio a listener heard after that commit (through the
  room: the voice's live pieces, the feed, the listener's Opus track);
* and ``room path``: listener hears minus speaker hears, what the room adds.

Sentences are tied to segments by their commit frames' ``segment`` in order (a sentence
Whisper splits or merges shifts the rest: the table counts them). Then, per run, the
server's CPU (its process, every thread: the voice's synthesis and encoding, the
listeners' Opus encoders), and the bytes per listener per second on the wire (the
transport's, from the peers' stats) beside the HLS rendition's (the voice's AAC segments
over the talk's length). Everything runs in real time: a quiet machine. Writes
``room_voice_bench.json`` and ``.md`` under ``--out``; the table to stdout, progress to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from clients.live_session import LiveSession, LiveSessionRefused
from clients.room_listener import RoomListener
from eval.bench.interpreter.bench import machine, percentile
from eval.bench.interpreter.talk import FRAME, RATE, SENTENCES, Talk, compose
from eval.local_server import free_port
from eval.process_cpu import cpu_times
from eval.tables import Table

LIMIT_S = 600  # a bound against a hung run, never a latency
VOICED_RMS = 300  # int16 RMS of a frame above this is speech
METRICS = ("first_commit_s", "speaker_hears_s", "listener_hears_s", "room_path_s")


def voiced(pcm: np.ndarray) -> bool:
    return len(pcm) > 0 and float(np.sqrt((pcm.astype(np.float64) ** 2).mean())) > VOICED_RMS


class Heard:
    """When voiced audio arrived, and how many bytes came."""

    def __init__(self) -> None:
        self.voiced_at: list[float] = []

    def first_after(self, t: float) -> float | None:
        return next((x for x in self.voiced_at if x >= t), None)


async def speaker(url: str, room: str, talk: Talk, source: str, target: str,
                  delay_s: float) -> dict[str, Any]:
    """One audio speaker in ``room``: its commit frames' times per segment, the times its
    own voice frames were voiced, the speech ends' times, and its error codes."""
    await asyncio.sleep(delay_s)
    commits: dict[int, float] = {}
    own = Heard()
    errors: list[str] = []
    ends = set(talk.end_frames())
    ends_at: list[float] = []
    async with LiveSession(url.replace("http://", "ws://") + "/v1/live",
                           open_timeout=60) as live:
        try:
            await live.start(room=room, input="audio", sample_rate=RATE, source_lang=source,
                             target_langs=[target], display="append", voices=[target])
        except LiveSessionRefused as refused:
            raise RuntimeError(f"room {room}: {refused.frame}") from None
        ws = live.ws  # the room's voice comes back as binary frames among the JSON ones

        async def speak() -> None:
            pcm = talk.pcm.tobytes()
            t0 = time.perf_counter()
            for n, i in enumerate(range(0, len(pcm), FRAME * 2)):
                await asyncio.sleep(max(0.0, t0 + n * FRAME / RATE - time.perf_counter()))
                await live.send_audio(pcm[i:i + FRAME * 2])
                if n in ends:
                    ends_at.append(time.perf_counter())
            await live.stop()

        sender = asyncio.create_task(speak())
        async with asyncio.timeout(LIMIT_S):
            async for raw in ws:
                now = time.perf_counter()
                if isinstance(raw, bytes):
                    if voiced(np.frombuffer(raw[2:len(raw) - len(raw) % 2], "<i2")):
                        own.voiced_at.append(now)
                    continue
                frame = json.loads(raw)
                kind = frame.get("type")
                if kind == "commit" and frame.get("text"):
                    commits.setdefault(int(frame["segment"]), now)
                elif kind == "error":
                    errors.append(frame.get("code") or "error")
                elif kind == "done":
                    break
        await sender
    return {"commits": [commits[k] for k in sorted(commits)], "own": own,
            "ends_at": ends_at, "errors": errors}


async def listener(url: str, room: str, lang: str, until: asyncio.Event) -> dict[str, Any]:
    """One WHEP listener of ``room`` until ``until``: when it heard speech, bytes in."""
    heard = Heard()
    start = time.perf_counter()
    async with RoomListener(url, room, lang) as ear:
        async def read() -> None:
            async for audio in ear.audio():
                if voiced(audio.pcm):
                    heard.voiced_at.append(time.perf_counter())

        reader = asyncio.create_task(read())
        await until.wait()
        await asyncio.sleep(2.0)  # the last words on their way
        stats = await ear.pc.getStats()
        reader.cancel()
    # the transport's bytes: RTP, RTCP and DTLS, what the listener's network carries
    inbound = sum(getattr(s, "bytesReceived", 0) or 0 for s in stats.values()
                  if getattr(s, "type", "") == "transport")
    return {"heard": heard, "bytes": inbound, "seconds": time.perf_counter() - start}


def rows_for(talk: Talk, spoke: dict[str, Any], ears: list[dict[str, Any]]) -> list[dict]:
    """One row per sentence and listener (sentence i: the i-th segment that committed)."""
    rows = []
    for i, (sentence, end) in enumerate(zip(talk.sentences, spoke["ends_at"], strict=False)):
        commit = spoke["commits"][i] if i < len(spoke["commits"]) else None
        own = spoke["own"].first_after(commit) if commit is not None else None
        for k, ear in enumerate(ears):
            heard = ear["heard"].first_after(commit) if commit is not None else None
            rows.append({"sentence": sentence, "listener": k,
                         "first_commit_s": _since(commit, end),
                         "speaker_hears_s": _since(own, end),
                         "listener_hears_s": _since(heard, end),
                         "room_path_s": None if heard is None or own is None
                         else round(heard - own, 3)})
    return rows


def _since(t: float | None, end: float) -> float | None:
    return None if t is None else round(t - end, 3)


async def run(url: str, talks: list[Talk], rooms: int, listeners: int,
              args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """``rooms`` rooms at once, each with one speaker and ``listeners`` listeners."""
    done = [asyncio.Event() for _ in range(rooms)]
    names = [f"bench-{tag}-{r}" for r in range(rooms)]
    ear_tasks = [[asyncio.create_task(listener(url, names[r], args.target, done[r]))
                  for _ in range(listeners)] for r in range(rooms)]
    await asyncio.sleep(1.0)  # the listeners connected

    async def room(r: int) -> dict[str, Any]:
        try:
            return await speaker(url, names[r], talks[r], args.source, args.target,
                                 r * args.stagger_s)
        finally:
            done[r].set()

    spoken = await asyncio.gather(*(room(r) for r in range(rooms)))
    ears = [await asyncio.gather(*tasks) for tasks in ear_tasks]
    rows, byte_rates, errors = [], [], []
    for r in range(rooms):
        rows += [{"room": r, **row} for row in rows_for(talks[r], spoken[r], ears[r])]
        byte_rates += [e["bytes"] / e["seconds"] for e in ears[r] if e["seconds"] > 0]
        errors += spoken[r]["errors"]
    return {"rows": rows, "listener_bytes_per_s": round(float(np.mean(byte_rates)), 1)
            if byte_rates else None, "errors": errors, "rooms": names}


async def hls_bytes_per_s(url: str, room: str, lang: str) -> float | None:
    """The voice's HLS rendition of ``room``'s talk: its segments' bytes per second."""
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.get(f"{url}/v1/rooms/{room}/voice/{lang}.m3u8")
        if r.status_code != 200:
            return None
        lines = r.text.splitlines()
        seconds = sum(float(x.split(":", 1)[1].rstrip(",")) for x in lines
                      if x.startswith("#EXTINF:"))
        total = 0
        for uri in (x for x in lines if x and not x.startswith("#")):
            total += len((await http.get(httpx.URL(r.url).join(uri))).content)
    return round(total / seconds, 1) if seconds else None


def summary(rooms: int, listeners: int, result: dict[str, Any], cpu_s: float,
            wall_s: float) -> dict[str, Any]:
    rows = result["rows"]
    out: dict[str, Any] = {"rooms": rooms, "listeners_per_room": listeners,
                           "sentences": len({(r["room"], r["sentence"]) for r in rows}),
                           "missed": sum(1 for r in rows if r["listener_hears_s"] is None),
                           "server_cpu": round(cpu_s / wall_s, 3) if wall_s else None,
                           "listener_bytes_per_s": result["listener_bytes_per_s"],
                           "hls_bytes_per_s": result.get("hls_bytes_per_s"),
                           "errors": result["errors"]}
    for metric in METRICS:
        values = [r[metric] for r in rows if r[metric] is not None]
        out[metric] = {"p50": percentile(values, 50), "p90": percentile(values, 90),
                       "n": len(values)}
    return out


def table(summaries: list[dict[str, Any]], info: dict[str, Any],
          args: argparse.Namespace) -> Table:
    title = (f"speech end -> heard, seconds, p50 / p90 ({args.source}->{args.target}, "
             f"{info['cpu']}, {info['cores']} cores, load {info['load_1m']} at the start)")
    t = Table(["rooms", "listeners/room", "sentences", "missed", "first commit",
               "speaker hears", "listener hears", "room path", "server CPU",
               "WebRTC B/s", "HLS B/s"], title=title)
    for s in summaries:
        t.add(s["rooms"], s["listeners_per_room"], s["sentences"], s["missed"],
              *(f"{_cell(s[m]['p50'])} / {_cell(s[m]['p90'])}" for m in METRICS),
              f"{s['server_cpu']:.2f}" if s["server_cpu"] is not None else "-",
              s["listener_bytes_per_s"] or "-", s["hls_bytes_per_s"] or "-")
    return t


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def start_server(args: argparse.Namespace, rooms: int, folder: Path) -> tuple[Any, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port",
           str(port), "--voice-engine", args.voice_engine, "--max-audio-speakers",
           str(rooms), "--max-live-sessions", str(max(8, rooms)), "--live-max-listeners",
           "5000", "--max-source-chars", "2000", "--data-dir", str(folder)]
    log = (folder / "server.log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited; see {folder / 'server.log'}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    proc.kill()
    raise RuntimeError("the server did not get ready in 10 minutes")


def _counts(text: str, what: str) -> list[int]:
    try:
        counts = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise SystemExit(f"room-voice-bench: {what}: whole numbers, e.g. 1,2") from None
    if not counts or min(counts) < 1:
        raise SystemExit(f"room-voice-bench: {what}: at least 1")
    return counts


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livetrans bench room-voice",
                                description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 2)[2].replace("``", ""),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rooms", default="1", help="comma-separated room counts (default 1)")
    p.add_argument("--listeners", default="1",
                   help="comma-separated listeners per room (default 1)")
    p.add_argument("--sentences", type=int, default=4,
                   help=f"sentences each speaker says (1-{len(SENTENCES['en'])}, default 4)")
    p.add_argument("--source", choices=sorted(SENTENCES), default="en",
                   help="the speakers' language (default en)")
    p.add_argument("--target", default="de", help="the room voice's language (default de)")
    p.add_argument("--pause-s", type=float, default=2.0,
                   help="silence after each sentence (default 2.0)")
    p.add_argument("--stagger-s", type=float, default=1.5,
                   help="seconds between rooms' starts (default 1.5)")
    p.add_argument("--voice-engine", default="auto",
                   help="the server's --voice-engine (default auto)")
    p.add_argument("--out", type=Path, default=Path("results/room-voice"),
                   help="folder for room_voice_bench.json and .md (default results/room-voice)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    room_counts = _counts(args.rooms, "--rooms")
    listener_counts = _counts(args.listeners, "--listeners")
    pool = SENTENCES[args.source]
    if not 1 <= args.sentences <= len(pool):
        raise SystemExit(f"room-voice-bench: --sentences: 1 to {len(pool)}")
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, load {info['load_1m']}",
          file=sys.stderr)
    talks = [compose((pool[k:] + pool[:k])[:args.sentences], args.source, 1.0, args.pause_s)
             for k in range(max(room_counts))]
    summaries, runs = [], []
    with tempfile.TemporaryDirectory(prefix="room-voice-bench-") as tmp:
        print("starting the server (model, Whisper, voices)", file=sys.stderr)
        proc, url = start_server(args, max(room_counts), Path(tmp))
        try:
            for rooms in room_counts:
                for listeners in listener_counts:
                    tag = f"{rooms}x{listeners}-{os.getpid()}"
                    print(f"{rooms} room(s) x {listeners} listener(s): "
                          f"{args.sentences} sentences, real time", file=sys.stderr)
                    before, t0 = cpu_times(proc.pid), time.perf_counter()
                    result = asyncio.run(run(url, talks, rooms, listeners, args, tag))
                    after, wall = cpu_times(proc.pid), time.perf_counter() - t0
                    result["hls_bytes_per_s"] = asyncio.run(
                        hls_bytes_per_s(url, result["rooms"][0], args.target))
                    cpu = (after.total_s - before.total_s) if before and after else 0.0
                    summaries.append(summary(rooms, listeners, result, cpu, wall))
                    runs.append({"rooms": rooms, "listeners": listeners,
                                 "rows": result["rows"]})
                    print(f"  done: {summaries[-1]}", file=sys.stderr)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    report = {"machine": info, "settings": {k: str(v) for k, v in vars(args).items()},
              "summaries": summaries, "runs": runs}
    t = table(summaries, info, args)
    print(t.markdown())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "room_voice_bench.json").write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (args.out / "room_voice_bench.md").write_text(
        f"# livetrans bench room-voice\n\nMachine: {info['cpu']}, {info['cores']} cores "
        f"({info['system']}), 1-minute load {info['load_1m']} at the start.\n\n"
        f"{t.markdown()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
