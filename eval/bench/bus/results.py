"""``livetrans bench bus``'s figures: what each viewer got of a talk, per fault and
phase, and the tables."""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from typing import Any

from eval.metrics.speed import percentile
from eval.tables import Table

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
