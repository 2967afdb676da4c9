"""``livetrans load-test``: many live-caption sessions plus HTTP traffic against one server.

    livetrans load-test --server http://127.0.0.1:8000 --sessions 50 --updates 100 \\
        --asr-file eval/samples/asr_sample_en.jsonl --http-clients 4

Loopback only, bounded: each WebSocket session replays ASR partial streams (in real time
by default, ``--speed`` to change) until it has sent ``--updates`` updates, while
``--http-clients`` loops send chat-completion translations until the sessions finish (and
at most ``--max-seconds``). It checks what a live-caption service must guarantee and prints
the figures: lost finals (finals without a final caption), 5xx responses, captions out of
order, and the time from a final's arrival to its caption (p50/p99). Sessions the server
refuses at once (admission control: ``busy``) are counted, not failed: they sent nothing.
Exit status 1 if any admitted session's final was lost, any 5xx seen, any caption came
out of order, or ``--max-seconds`` ran out first; 2 (one line on stderr) for a mistake: no
server at ``--server``, a key it refuses, a malformed ``--asr-file``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np
import websockets

from app.usage import PlainHelp, UsageError, checked, count, positive_int
from clients.asr_file import load_utterances
from clients.urls import default_server, http_url, live_url

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


@dataclass
class LoadStats:
    finals_sent: int = 0
    finals_captioned: int = 0
    captions: int = 0
    out_of_order: int = 0
    error_frames: dict[str, int] = field(default_factory=dict)
    final_latency_ms: list[float] = field(default_factory=list)
    http_status: dict[int, int] = field(default_factory=dict)
    http_latency_ms: list[float] = field(default_factory=list)
    sessions_admitted: int = 0
    sessions_refused: dict[str, int] = field(default_factory=dict)  # by error code
    timed_out: bool = False  # --max-seconds ran out before every session finished


def build_updates(utterances: list[dict], n: int, offset: int) -> list[tuple[float, dict]]:
    """``n`` timed updates cycling through utterances from ``offset``; segments renumbered,
    and the last utterance is cut short with its final so every segment ends final."""
    out: list[tuple[float, dict]] = []
    clock = 0.0
    seg = 0
    i = offset
    while len(out) < n:
        events = utterances[i % len(utterances)]["events"]
        room = n - len(out)
        if len(events) > room:
            events = events[: room - 1] + [dict(events[-1], type="final")] if room > 1 else \
                [dict(events[-1], type="final")]
        base = clock
        for ev in events:
            out.append((base + float(ev["t"]), {"type": ev["type"], "segment": seg,
                                                "text": ev["text"]}))
        clock = base + float(events[-1]["t"]) + 0.3
        seg += 1
        i += 1
    return out


async def live_session(url: str, updates: list[tuple[float, dict]], speed: float,
                       target: str, stats: LoadStats, headers: dict[str, str] | None = None,
                       ) -> None:
    sent_final_at: dict[int, float] = {}
    async with websockets.connect(url, max_size=None, open_timeout=60,
                                  additional_headers=headers) as ws:
        try:  # a refused session gets an error frame and a close, maybe before 'start'
            await ws.send(json.dumps({"type": "start", "target_lang": target}))
        except websockets.ConnectionClosed:
            pass
        try:
            ready = json.loads(await ws.recv())
        except websockets.ConnectionClosed as exc:
            reason = exc.rcvd.reason if exc.rcvd is not None and exc.rcvd.reason else "closed"
            ready = {"type": "error", "code": reason}
        if ready.get("type") != "ready":
            # admission control: refused at once with a reason (busy, too many connections)
            code = str(ready.get("code", "refused"))
            stats.sessions_refused[code] = stats.sessions_refused.get(code, 0) + 1
            return
        stats.sessions_admitted += 1

        async def reader() -> None:
            last: tuple[int, int] = (-1, 0)
            async for raw in ws:
                msg = json.loads(raw)
                if msg["type"] == "caption":
                    stats.captions += 1
                    key = (msg["segment"], msg["revision"])
                    if key <= last:
                        stats.out_of_order += 1
                    last = key
                    if msg["final"]:
                        stats.finals_captioned += 1
                        t0 = sent_final_at.get(msg["segment"])
                        if t0 is not None:
                            stats.final_latency_ms.append((time.perf_counter() - t0) * 1000)
                elif msg["type"] == "error":
                    code = msg.get("code", "?")
                    stats.error_frames[code] = stats.error_frames.get(code, 0) + 1
                elif msg["type"] == "done":
                    return

        task = asyncio.create_task(reader())
        try:
            start = time.perf_counter()
            for t, msg in updates:
                delay = start + t / speed - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await ws.send(json.dumps(msg))
                if msg["type"] == "final":
                    stats.finals_sent += 1
                    sent_final_at[msg["segment"]] = time.perf_counter()
            await ws.send(json.dumps({"type": "stop"}))
            await task
        finally:  # cut short (--max-seconds): the reader goes with the session, quietly
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved: the session's own error is the one raised


async def http_client(base: str, texts: list[str], stop: asyncio.Event, stats: LoadStats,
                      target: str, headers: dict[str, str] | None = None) -> None:
    async with httpx.AsyncClient(timeout=300, headers=headers) as client:
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            r = await client.post(base + "/v1/chat/completions", json={
                "model": "default", "target_lang": target,
                "messages": [{"role": "user", "content": texts[i % len(texts)]}]})
            stats.http_status[r.status_code] = stats.http_status.get(r.status_code, 0) + 1
            stats.http_latency_ms.append((time.perf_counter() - t0) * 1000)
            if r.status_code == 429:
                await asyncio.sleep(0.5)
            i += 1


async def check_server(base: str, headers: dict[str, str] | None) -> None:
    """One request before the load starts, so that a wrong address or key is one line
    (``UsageError``) rather than a run of refused sessions and 401s reported as figures."""
    try:
        async with httpx.AsyncClient(timeout=30, headers=headers) as client:
            r = await client.get(base + "/v1/models")
    except httpx.TransportError as exc:
        raise UsageError(f"cannot reach the server at {base}: {exc or type(exc).__name__}; "
                         "is `livetrans serve` running?") from None
    if r.status_code == 401:
        raise UsageError(f"the server at {base} needs an API key: pass it with --api-key")
    if r.status_code == 503 and "not_ready" in r.text:
        raise UsageError(f"the server at {base} is still loading its model: wait for its "
                         "'ready:' line")
    if r.status_code != 200:
        raise UsageError(f"{base}/v1/models answered {r.status_code}: is --server a livetrans "
                         "server?")


def reference_texts(utterances: list[dict]) -> list[str]:
    """What the HTTP clients translate: each utterance's reference, else its last event."""
    return [str(u.get("reference") or u["events"][-1]["text"]) for u in utterances]


async def run(args: argparse.Namespace) -> LoadStats:
    base = http_url(args.server)
    if urlsplit(base).hostname not in LOOPBACK:
        raise UsageError(f"--server {args.server}: load-test only targets loopback servers "
                         f"({', '.join(sorted(LOOPBACK))})")
    utterances = load_utterances(args.asr_file, option="--asr-file")
    api_key = getattr(args, "api_key", None)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    await check_server(base, headers)
    stats = LoadStats()
    ws_url = live_url(base)
    stop = asyncio.Event()
    texts = reference_texts(utterances)
    http_tasks = [asyncio.create_task(http_client(base, texts[k::7] or texts, stop, stats,
                                                  args.target_lang, headers))
                  for k in range(args.http_clients)]
    sessions = [
        live_session(ws_url, build_updates(utterances, args.updates, offset=k * 3),
                     args.speed, args.target_lang, stats, headers)
        for k in range(args.sessions)
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*sessions), args.max_seconds)
    except TimeoutError:
        stats.timed_out = True  # the figures so far are reported, unfinished finals as lost
    finally:
        stop.set()
        await asyncio.gather(*http_tasks, return_exceptions=True)
    return stats


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError(text)
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans load-test", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--server", default=default_server(),
                    help="loopback server address (default: $LIVETRANS_SERVER, else "
                         "%(default)s)")
    ap.add_argument("--asr-file", type=Path, required=True,
                    help="ASR partials JSONL the sessions replay, one utterance a line")
    whole = checked(positive_int, "a whole number >= 1")
    ap.add_argument("--sessions", type=whole, default=50, help="concurrent WebSocket sessions")
    ap.add_argument("--updates", type=whole, default=100, help="updates each session sends")
    ap.add_argument("--http-clients", type=checked(count, "a whole number >= 0"), default=4,
                    help="concurrent chat-completion loops alongside the sessions")
    ap.add_argument("--speed", type=checked(_positive_float, "a number > 0"), default=1.0,
                    help="replay speed factor (2 = twice real time)")
    ap.add_argument("--api-key", default=None, help="bearer token, if the server needs one")
    ap.add_argument("--target-lang", default="de", help="translation language, ISO 639-1")
    ap.add_argument("--max-seconds", type=checked(_positive_float, "a number > 0"), default=1800,
                    help="time limit for the sessions, in seconds")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    stats = asyncio.run(run(args))
    wall = time.perf_counter() - t0
    five_xx = sum(n for code, n in stats.http_status.items() if code >= 500)
    final_ms, http_ms = ([float(v) for v in np.percentile(ms, [50, 99])]
                         if ms else [None, None]
                         for ms in (stats.final_latency_ms, stats.http_latency_ms))
    report = {
        "sessions": args.sessions, "updates_per_session": args.updates,
        "sessions_admitted": stats.sessions_admitted,
        "sessions_refused": stats.sessions_refused, "timed_out": stats.timed_out,
        "wall_s": round(wall, 1),
        "finals_sent": stats.finals_sent, "finals_captioned": stats.finals_captioned,
        "lost_finals": stats.finals_sent - stats.finals_captioned,
        "captions": stats.captions, "out_of_order": stats.out_of_order,
        "error_frames": stats.error_frames,
        "final_to_caption_ms_p50": final_ms[0], "final_to_caption_ms_p99": final_ms[1],
        "http_status": stats.http_status, "http_5xx": five_xx,
        "http_ms_p50": http_ms[0], "http_ms_p99": http_ms[1],
    }
    print(json.dumps(report, indent=2))
    ok = (report["lost_finals"] == 0 and five_xx == 0 and stats.out_of_order == 0
          and not stats.timed_out)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
