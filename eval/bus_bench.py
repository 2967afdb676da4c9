"""``livetrans bench-bus``: what sharing rooms on Redis costs, and what Redis faults cost
(README "Scale-out").

    livetrans bench-bus --flores-dir eval/samples/flores_layout --sentences 3 \\
        --viewers 20 --out results/bus
    livetrans bench-bus --flores-dir eval/samples/flores_layout --sentences 3 \\
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
import resource
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack, closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import websockets

from app.usage import PlainHelp, add_model_options
from eval.datasets.flores import read_flores
from eval.datasets.streams import lag_k_stream
from eval.events_bench import rss_mb
from eval.metrics.speed import percentile
from eval.redis_process import RedisProcess
from eval.tables import Table, show, write_results

FAULTS = ("none", "kill", "oom", "pause", "restart", "foreign")
OWN_REDIS = ("pause", "restart")  # need the redis-server process this bench started
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
PREFIX = "livetrans"  # the room bus's key prefix (app.rooms.bus.redis_bus)
REPEAT_S = 1.0  # kill and foreign act again this often while their fault lasts
PACE = 2.0  # from the fault on, the rest of a talk takes this many fault lengths
JOIN_BATCH = 50  # viewers connecting at once (500 viewers join in ten batches)
JOIN_LIMIT_S = 120.0  # for one batch of viewers to join
JOIN_ATTEMPTS = 10  # a viewer refused with room_bus_unavailable tries again ...
JOIN_RETRY_S = 0.5  # ... after this long, as the refusal asks ("retry shortly")
REPLY_LIMIT_S = 120.0  # for the speaker's caption of one update
START_ATTEMPTS = 30  # 'start' refused while the bus recovers: tried again once a second
END_LIMIT_S = 60.0  # after the talk: for 'done', then for every viewer's 'ended'
RSS_EVERY_S = 0.25
PHASES = ("before", "during", "after")
Window = tuple[float, float]  # when a fault began and when it was healed (perf_counter)


# -- results -------------------------------------------------------------------------------
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


@dataclass
class ViewerLog:
    """What one viewer received, in arrival order: (segment, revision, final, time)."""

    same: bool  # on the speaker's replica
    frames: list[tuple[int, int, bool, float]] = field(default_factory=list)
    ended: bool = False  # got 'ended': it saw the whole talk
    refusals: int = 0  # joins refused with room_bus_unavailable before it got in

    def add(self, frame: dict[str, Any], t: float) -> None:
        segment, revision = frame.get("segment"), frame.get("revision", 0)
        if isinstance(segment, int) and isinstance(revision, int):
            self.frames.append((segment, revision, bool(frame.get("final")), t))

    def first_seen(self) -> dict[tuple[int, int, bool], float]:
        seen: dict[tuple[int, int, bool], float] = {}
        for segment, revision, final, t in self.frames:
            seen.setdefault((segment, revision, final), t)
        return seen


@dataclass
class Talk:
    """One talk as the clients saw it, every time on this process's one clock."""

    room: str
    views: list[ViewerLog]
    sent: dict[tuple[int, int, bool], float] = field(default_factory=dict)  # the speaker's
    updates: int = 0
    wall_s: float = 0.0
    t0: float = 0.0  # the first update
    window: Window | None = None
    speaker_errors: int = 0  # error frames instead of a caption
    start_refusals: int = 0  # 'start' refused with room_bus_unavailable
    round_trips: list[tuple[float, float]] = field(default_factory=list)  # (sent, ms)
    rss_peak_mb: float = 0.0


def phase(t: float, window: Window | None) -> str:
    """Where a final falls against a fault: by when the speaker got it."""
    if window is None or t < window[0]:
        return "before"
    return "during" if t <= window[1] else "after"


def speaker_finals(sent: dict[tuple[int, int, bool], float]) -> dict[int, float]:
    """Each segment's final, as the speaker got it (segment -> time)."""
    finals: dict[int, float] = {}
    for (segment, _revision, final), t in sent.items():
        if final:
            finals[segment] = min(t, finals.get(segment, t))
    return finals


@dataclass
class Delivery:
    """One replica's viewers against the speaker: each viewer must see each final once and
    in order; every way it did not is counted, so a fault's cost is a number, not a hunch."""

    viewers: int = 0
    expected: int = 0  # the speaker's finals x viewers
    delivered: int = 0  # finals first seen by a viewer
    missed: int = 0
    duplicated: int = 0  # a final a viewer had seen already
    out_of_order: int = 0  # a final after a later segment's final
    unexpected: int = 0  # a final of a segment the speaker never got (forged, foreign)
    partials: int = 0  # partial frames delivered
    lost_viewers: int = 0  # connections that ended without 'ended'
    refused_joins: int = 0  # joins refused (room_bus_unavailable) and tried again
    delays: dict[str, list[float]] = field(
        default_factory=lambda: {p: [] for p in PHASES})  # ms, by the final's phase

    def add(self, finals: dict[int, float], view: ViewerLog, window: Window | None) -> None:
        seen: set[int] = set()
        newest = -1
        for segment, _revision, final, t in view.frames:
            if not final:
                self.partials += 1
                continue
            if segment in seen:
                self.duplicated += 1
                continue
            seen.add(segment)
            if segment < newest:
                self.out_of_order += 1
            newest = max(newest, segment)
            if segment not in finals:
                self.unexpected += 1
                continue
            self.delivered += 1
            self.delays[phase(finals[segment], window)].append((t - finals[segment]) * 1000)
        self.missed += sum(1 for segment in finals if segment not in seen)
        self.expected += len(finals)
        self.viewers += 1
        self.lost_viewers += not view.ended
        self.refused_joins += view.refusals

    def latency(self, when: str) -> tuple[float | None, float | None]:
        xs = self.delays[when]
        return _round(percentile(xs, 50)), _round(percentile(xs, 99))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1) + 0.0  # + 0.0: no "-0.0" in a table


@dataclass
class FaultRun:
    fault: str
    viewers: int
    updates: int = 0
    finals: int = 0
    window_s: tuple[float, float] | None = None  # from the talk's first update
    same: Delivery = field(default_factory=Delivery)  # viewers on the speaker's replica
    other: Delivery = field(default_factory=Delivery)  # on the other one
    speaker_errors: int = 0
    start_refusals: int = 0
    refused_after: int = 0  # probe joins refused right after the talk (``settle``)
    update_ms: dict[str, list[float]] = field(
        default_factory=lambda: {p: [] for p in PHASES})  # the speaker's, by phase
    skipped: int = 0  # foreign or malformed bus entries the replicas skipped
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    rss_peak_mb: float = 0.0
    maxrss_mb: float = 0.0  # the process's high-water mark so far (getrusage)

    def record(self, talk: Talk) -> None:
        finals = speaker_finals(talk.sent)
        self.updates, self.finals = talk.updates, len(finals)
        self.speaker_errors, self.rss_peak_mb = talk.speaker_errors, talk.rss_peak_mb
        self.start_refusals = talk.start_refusals
        for sent, ms in talk.round_trips:
            self.update_ms[phase(sent, talk.window)].append(ms)
        if talk.window is not None:
            self.window_s = (round(talk.window[0] - talk.t0, 2),
                             round(talk.window[1] - talk.t0, 2))
        for view in talk.views:
            (self.same if view.same else self.other).add(finals, view, talk.window)

    def totals(self) -> dict[str, int]:
        keys = ("missed", "duplicated", "out_of_order", "unexpected", "lost_viewers",
                "refused_joins")
        return {k: getattr(self.same, k) + getattr(self.other, k) for k in keys}

    def summary(self) -> dict:
        d: dict[str, Any] = {"fault": self.fault, "viewers": self.viewers,
                             "updates": self.updates, "finals": self.finals,
                             "fault_window_s": self.window_s, **self.totals()}
        for side, dl in (("same", self.same), ("other", self.other)):
            d[f"viewers_{side}"] = dl.viewers
            d[f"finals_delivered_{side}"] = dl.delivered
            d[f"finals_expected_{side}"] = dl.expected
            d[f"partials_{side}"] = dl.partials
            for when in PHASES:
                p50, p99 = dl.latency(when)
                d[f"latency_{side}_{when}_p50_ms"] = p50
                d[f"latency_{side}_{when}_p99_ms"] = p99
        for when in PHASES:  # the bus never makes the speaker wait, fault or not
            ms = self.update_ms[when]
            d[f"speaker_ms_per_update_{when}_p50"] = _round(percentile(ms, 50))
            d[f"speaker_ms_per_update_{when}_max"] = _round(max(ms, default=None))
        d.update(speaker_errors=self.speaker_errors, start_refusals=self.start_refusals,
                 refused_joins_after=self.refused_after,
                 skipped_entries=self.skipped,
                 rss_before_mb=round(self.rss_before_mb, 1),
                 rss_after_mb=round(self.rss_after_mb, 1),
                 rss_peak_mb=round(self.rss_peak_mb, 1), maxrss_mb=round(self.maxrss_mb, 1))
        return d


def allow_open_files(viewers: int) -> None:
    """Each viewer holds two sockets in this process (its client and the server's end):
    raise the soft limit on open files towards the hard one, or say in one line why not."""
    need = 3 * viewers + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise SystemExit(f"bench-bus: {viewers} viewers need about {need} open files; the "
                         f"limit is {hard} (ulimit -n)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def maxrss_mb() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- Redis ---------------------------------------------------------------------------------
def start_redis(stack: ExitStack) -> RedisProcess:
    """A throwaway ``redis-server`` on loopback, stopped when ``stack`` closes."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench-bus: no --room-bus given and no redis-server installed "
                         "(make system-deps installs it)")
    workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="livetrans-redis-"))
    process = RedisProcess(binary, workdir, fsync="everysec")
    stack.callback(process.stop)
    try:
        process.start()
    except RuntimeError as exc:
        raise SystemExit(f"bench-bus: {exc}") from None
    return process


def junk_entries() -> list[dict[str, Any]]:
    """Stream entries another client might write to a room's keys: wrong shapes, not
    forgeries (a well-formed caption of the running talk cannot be told from a real one)."""
    other = "f0reign0" * 2  # a talk id that is not the running talk's
    caption = json.dumps({"type": "caption", "segment": 0, "revision": 0, "final": True,
                          "lang": "de", "text": "junk"})
    return [
        {"k": "caption"},
        {"k": "caption", "talk": other, "lang": "de", "segment": "0", "frame": caption},
        {"k": "caption", "talk": "", "lang": "de", "segment": "x", "frame": "{"},
        {"k": "caption", "talk": other, "lang": "de", "segment": "1", "frame": "[1, 2]"},
        {"k": "start", "talk": other, "info": "not json"},
        {"k": "start", "talk": other, "info": json.dumps([1, 2])},
        {"k": "end", "talk": other},
        {"k": "nonsense", "talk": other},
        {"frame": "null"},
        {"data": json.dumps({"type": "caption"}), "bytes": b"\xff\xfe\x00junk"},
    ]


JUNK_MESSAGES = ("junk", "", "null", "[1, 2, 3]", '{"type": "caption"}',
                 '{"k": "caption", "frame": 7}', '{"type": "ended"}', "\u00ff" * 64)


class FaultInjector:
    """Makes one fault happen to Redis and heals it. Each step blocks (a command, a signal,
    a restart), so the bench runs them on a thread while the clients' loop goes on; the
    lock keeps a heal from racing an injection that is still running."""

    def __init__(self, kind: str, url: str, process: RedisProcess | None) -> None:
        if kind in OWN_REDIS and process is None:
            raise ValueError(f"fault '{kind}' needs the bench's own redis-server")
        self.kind, self.url, self.process = kind, url, process
        self.room = ""
        self._lock = threading.Lock()
        self._active = False
        self._maxmemory = "0"

    @property
    def repeats(self) -> bool:
        return self.kind in ("kill", "foreign")

    def _client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=2,
                                    decode_responses=True)

    def inject(self) -> None:
        with self._lock:
            if self.kind == "oom":
                with closing(self._client()) as c:
                    # the setting to heal to, read first: a Redis given by --room-bus gets
                    # its own back, not ours
                    self._maxmemory = str(c.config_get("maxmemory").get("maxmemory", "0"))
                    self._active = True
                    c.config_set("maxmemory", 1)
                return
            self._active = True
            if self.kind == "pause":
                self.process.pause()
            elif self.kind == "restart":
                self.process.stop()
            else:
                self._act()

    def again(self) -> None:
        with self._lock:
            if self._active:
                self._act()

    def _act(self) -> None:
        if self.kind == "kill":
            with closing(self._client()) as c:
                c.execute_command("CLIENT", "KILL", "TYPE", "normal")
                c.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        elif self.kind == "foreign":
            self._foreign()

    def _foreign(self) -> None:
        keys = [f"{PREFIX}:{what}:{self.room}" for what in ("finals", "partials", "room")]
        with closing(self._client()) as c:
            pipe = c.pipeline(transaction=False)
            for key in keys:
                for fields in junk_entries():
                    pipe.xadd(key, fields, maxlen=1000, approximate=True)
                for message in JUNK_MESSAGES:
                    pipe.publish(key, message)
            pipe.expire(keys[2], 3600)  # the bus never reads it: it must not stay forever
            pipe.execute()

    def heal(self) -> None:
        with self._lock:
            if not self._active:
                return
            self._active = False
            if self.kind == "oom":
                with closing(self._client()) as c:
                    c.config_set("maxmemory", self._maxmemory)
            elif self.kind == "pause":
                self.process.resume()
            elif self.kind == "restart":
                self.process.start()


async def fault_window(injector: FaultInjector, fault_s: float) -> Window:
    """Inject, keep it up (kill and foreign again every ``REPEAT_S``) for ``fault_s``, heal.
    Healed however this ends, so no fault outlives its talk."""
    start = time.perf_counter()
    try:
        await asyncio.to_thread(injector.inject)
        end_at = start + fault_s
        while (left := end_at - time.perf_counter()) > 0:
            await asyncio.sleep(min(REPEAT_S, left))
            if injector.repeats and end_at - time.perf_counter() > 0.1:
                await asyncio.to_thread(injector.again)
        await asyncio.to_thread(injector.heal)
    finally:
        injector.heal()  # a no-op once healed; after a failure or a cancel, the cleanup
    return start, time.perf_counter()


@dataclass
class Plan:
    """A fault for one talk: injected after ``at`` of its updates, healed ``fault_s`` on."""

    injector: FaultInjector
    at: float
    fault_s: float

    def first_update(self, n: int) -> int:
        return min(max(round(self.at * n), 0), max(n - 1, 0))


# -- clients -------------------------------------------------------------------------------
async def _viewer(url: str, view: ViewerLog, joined: list, stay: bool = True) -> None:
    """One viewer, joined as a client should: refused with ``room_bus_unavailable`` (the
    bus had a moment), it tries again shortly, a bounded number of times (counted).
    ``stay=False``: a probe, gone once in."""
    for attempt in range(JOIN_ATTEMPTS):
        async with websockets.connect(url, max_size=None, open_timeout=JOIN_LIMIT_S) as ws:
            first = json.loads(await ws.recv())
            if first.get("type") == "joined":
                if stay:
                    await _watch(ws, view, first, joined)
                return
            if first.get("code") != "room_bus_unavailable" or attempt == JOIN_ATTEMPTS - 1:
                raise RuntimeError(f"viewer refused: {first.get('code')}: "
                                   f"{first.get('message')}")
        view.refusals += 1
        await asyncio.sleep(JOIN_RETRY_S)


async def _watch(ws: Any, view: ViewerLog, first: dict, joined: list) -> None:
    now = time.perf_counter()
    for payload in first.get("recent") or []:
        view.add(payload, now)
    joined.append(1)
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("type") == "caption":
            view.add(frame, time.perf_counter())
        elif frame.get("type") == "ended":
            view.ended = True


async def _all_joined(tasks: list[asyncio.Task], joined: list,
                      limit_s: float = JOIN_LIMIT_S) -> None:
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


async def _join_viewers(urls: list[str], views: list[ViewerLog],
                        tasks: list[asyncio.Task]) -> None:
    """Connect the viewers ``JOIN_BATCH`` at a time, each batch joined before the next
    starts: 500 handshakes at once would time out on a busy machine, not measure the bus."""
    joined: list = []
    for i in range(0, len(urls), JOIN_BATCH):
        tasks += [asyncio.create_task(_viewer(url, view, joined))
                  for url, view in zip(urls[i:i + JOIN_BATCH], views[i:i + JOIN_BATCH],
                                       strict=True)]
        await _all_joined(tasks, joined)


async def settle(urls: list[str]) -> int:
    """Probe viewers join a fresh room at once and leave; returns the joins refused (and
    probes never let in). Run right after a fault's talk, so that refusals the fault left
    behind (connections Redis dropped, still pooled) count in its row, not the next one's."""
    room = "settle-" + uuid.uuid4().hex[:8]
    views = [ViewerLog(True) for _ in urls]
    results = await asyncio.gather(
        *(_viewer(f"{url}/v1/live/watch?room={room}&lang=de", view, [], stay=False)
          for url, view in zip(urls, views, strict=True)), return_exceptions=True)
    return sum(v.refusals for v in views) + sum(isinstance(r, Exception) for r in results)


async def _recv(ws: Any, deadline: float) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), max(deadline - time.perf_counter(),
                                                            0.001)))


async def _start(ws: Any, talk: Talk) -> None:
    """'start' until 'ready'. Right after a fault the bus may refuse a room for a moment
    (``room_bus_unavailable``): tried again once a second, ``START_ATTEMPTS`` times."""
    for _ in range(START_ATTEMPTS):
        await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": talk.room}))
        reply = await _recv(ws, time.perf_counter() + REPLY_LIMIT_S)
        if reply.get("type") == "ready":
            return
        if reply.get("code") != "room_bus_unavailable":
            raise RuntimeError(f"start refused: {reply}")
        talk.start_refusals += 1
        await asyncio.sleep(1.0)
    raise RuntimeError(f"start refused {START_ATTEMPTS} times: the room bus is unavailable")


async def _reply(ws: Any) -> dict:
    """The speaker's caption (or error) for the update just sent."""
    deadline = time.perf_counter() + REPLY_LIMIT_S
    while True:
        msg = await _recv(ws, deadline)
        if msg.get("type") in ("caption", "error"):
            return msg


async def _stop(ws: Any) -> None:
    await ws.send(json.dumps({"type": "stop"}))
    deadline = time.perf_counter() + END_LIMIT_S
    with suppress(websockets.ConnectionClosedOK):
        while (await _recv(ws, deadline)).get("type") != "done":
            pass


async def _speak(ws: Any, sentences: list[str], talk: Talk, plan: Plan | None) -> None:
    """The talk's updates, closed loop. With a plan, its fault starts at the planned update
    and the updates from there on are paced over ``PACE`` fault lengths."""
    updates = [(seg, u) for seg, s in enumerate(sentences) for u in lag_k_stream(s, 3)]
    at = plan.first_update(len(updates)) if plan is not None else -1
    window: asyncio.Task | None = None
    paced_from, pace = 0.0, 0.0
    talk.t0 = time.perf_counter()
    try:
        for i, (seg, update) in enumerate(updates):
            if plan is not None and i == at:
                window = asyncio.create_task(fault_window(plan.injector, plan.fault_s))
                paced_from = time.perf_counter()
                pace = PACE * plan.fault_s / (len(updates) - at)
            if window is not None:
                await asyncio.sleep(max(paced_from + (i - at) * pace - time.perf_counter(), 0))
            kind = "final" if update.is_final else "partial"
            sent = time.perf_counter()
            await ws.send(json.dumps({"type": kind, "segment": seg, "text": update.source}))
            talk.updates += 1
            msg = await _reply(ws)
            talk.round_trips.append((sent, (time.perf_counter() - sent) * 1000))
            if msg["type"] == "caption":
                talk.sent.setdefault((msg["segment"], msg["revision"], msg["final"]),
                                     time.perf_counter())
            else:
                talk.speaker_errors += 1
        talk.wall_s = time.perf_counter() - talk.t0
    finally:
        if window is not None:  # healed before the talk ends, whatever happened
            await asyncio.wait([window], timeout=plan.fault_s + END_LIMIT_S)
    if window is not None:
        talk.window = _healed(window, plan.injector.kind)


def _healed(window: asyncio.Task, kind: str) -> Window:
    """The fault's window, or why there is none (a fault that failed is the run's end:
    its figures would say nothing about the fault)."""
    if not window.done():
        window.cancel()  # its cleanup heals
        raise RuntimeError(f"fault '{kind}' did not heal in time")
    if window.cancelled():
        raise RuntimeError(f"fault '{kind}' was cancelled")
    exc = window.exception()
    if exc is not None:
        raise RuntimeError(f"fault '{kind}' failed: {type(exc).__name__}: {exc}") from exc
    return window.result()


async def _sample_rss(talk: Talk) -> None:
    while True:
        talk.rss_peak_mb = max(talk.rss_peak_mb, rss_mb())
        await asyncio.sleep(RSS_EVERY_S)


async def _finish(tasks: list[asyncio.Task], limit_s: float) -> None:
    """Let the viewers see the talk end (bounded); any still open then are closed."""
    if tasks:
        await asyncio.wait(tasks, timeout=limit_s)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _talk(speaker_url: str, viewer_urls: list[tuple[str, bool]],
                sentences: list[str], plan: Plan | None = None) -> Talk:
    talk = Talk("bench-" + uuid.uuid4().hex[:8], [ViewerLog(same) for _, same in viewer_urls])
    if plan is not None:
        plan.injector.room = talk.room
    sampler = asyncio.create_task(_sample_rss(talk))
    tasks: list[asyncio.Task] = []
    try:
        async with websockets.connect(f"{speaker_url}/v1/live", max_size=None,
                                      open_timeout=120) as ws:
            await _start(ws, talk)
            await _join_viewers([f"{url}/v1/live/watch?room={talk.room}&lang=de"
                                 for url, _ in viewer_urls], talk.views, tasks)
            await _speak(ws, sentences, talk, plan)
            await _stop(ws)
        await _finish(tasks, END_LIMIT_S)
    finally:
        await _finish(tasks, 0)
        sampler.cancel()
    return talk


def legacy_run(name: str, talk: Talk) -> BusRun:
    """The no-fault comparison's figures: every caption frame's delay, finals missed."""
    run = BusRun(name, updates=talk.updates, wall_s=talk.wall_s)
    run.finals = sum(1 for key in talk.sent if key[2])
    for view in talk.views:
        seen = view.first_seen()
        for key, t in talk.sent.items():
            if key in seen:
                (run.delays_same if view.same else run.delays_other).append(
                    (seen[key] - t) * 1000)
            elif key[2]:
                run.missed_finals += 1
    return run


# -- tables --------------------------------------------------------------------------------
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


def _pair(x: object, y: object) -> str:
    return f"{'-' if x is None else x} / {'-' if y is None else y}"


def fault_table(runs: list[FaultRun], viewers: int) -> Table:
    t = Table(["fault", "fault window s", "finals", "finals to viewers, same replica",
               "finals to viewers, other replica", "missed / dup / out of order",
               "partials same / other", "latency during, other replica p50 / p99 ms",
               "latency after, other replica p50 / p99 ms",
               "joins refused, talk + after / viewers lost",
               "speaker ms / update during, p50 / max", "RSS before / after / peak MB"],
              title=f"Redis faults under the room bus: {viewers} viewers on two replicas "
                    "(memory: RSS of the bench process, which runs both replicas and "
                    "every client)")
    for r in runs:
        totals = r.totals()
        window = "-" if r.window_s is None else f"{r.window_s[0]:.1f}-{r.window_s[1]:.1f}"
        t.add(r.fault, window, r.finals, f"{r.same.delivered} / {r.same.expected}",
              f"{r.other.delivered} / {r.other.expected}",
              f"{totals['missed']} / {totals['duplicated']} / {totals['out_of_order']}",
              f"{r.same.partials} / {r.other.partials}", _pair(*r.other.latency("during")),
              _pair(*r.other.latency("after")),
              f"{totals['refused_joins']} + {r.refused_after} / {totals['lost_viewers']}",
              _pair(_round(percentile(r.update_ms["during"], 50)),
                    _round(max(r.update_ms["during"], default=None))),
              f"{r.rss_before_mb:.0f} / {r.rss_after_mb:.0f} / {r.rss_peak_mb:.0f}")
    return t


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
            run = legacy_run(name, asyncio.run(_talk(_ws(a.url), urls, sentences)))
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
        asyncio.run(_talk(_ws(a.url), [], sentences[:1]))
        for kind in args.faults:
            run = FaultRun(kind, args.viewers, rss_before_mb=rss_mb())
            skipped = _skipped(a, b)
            plan = Plan(FaultInjector(kind, url, process), args.fault_at, args.fault_s)
            talk = asyncio.run(_talk(_ws(a.url), _split(a, b, args.viewers), sentences, plan))
            run.record(talk)
            run.refused_after = asyncio.run(settle(
                [url for url, _ in _split(a, b, 2 * min(JOIN_BATCH, args.viewers))]))
            run.rss_after_mb, run.maxrss_mb = rss_mb(), maxrss_mb()
            run.skipped = _skipped(a, b) - skipped
            runs.append(run)
            print(json.dumps(run.summary()), flush=True)
    return runs


# -- command line --------------------------------------------------------------------------
def parse_faults(text: str) -> list[str]:
    """``--faults`` as a list; an unknown name is refused with the known ones."""
    faults = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        raise argparse.ArgumentTypeError(
            f"unknown fault '{(unknown or [''])[0]}': choose from {', '.join(FAULTS)}")
    return faults


def check_fault_target(faults: list[str], room_bus: str | None) -> str | None:
    """Why these faults cannot be injected into ``room_bus`` (None: they can). Faults act
    on a Redis on this machine only, and pause and restart need the bench's own process."""
    if room_bus is None or set(faults) == {"none"}:
        return None
    own = [f for f in faults if f in OWN_REDIS]
    if own:
        return (f"--faults {','.join(own)}: needs the redis-server this bench starts; "
                "leave out --room-bus")
    parts = urlsplit(room_bus)
    if parts.scheme != "redis" or parts.hostname not in LOOPBACK:
        return "--faults: injected only into a Redis on loopback (redis://127.0.0.1:PORT/DB)"
    return None


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="livetrans bench-bus", description=__doc__,
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
