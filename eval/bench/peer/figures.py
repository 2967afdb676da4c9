"""The figures of ``llama-server-bench --live`` (``eval.bench.peer.live``): what one update and one
method's pass recorded, and what is made of them: speed against llama-server, quality of the
finals, flicker, and the mean of every part of an update's time (``app.engine.timings``).
Apart from the run so that they can be computed, and tested, without any server.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.engine.timings import NESTED, PARTS
from app.translation.pathology import diagnose
from app.translation.prompts import FewShotFormat
from eval.datasets.streams import Stream
from eval.metrics.erasure import NormalizedErasure, ne_unit
from eval.metrics.quality import ChrF, paired_chrf_difference
from eval.tables import Table

METHODS = ("llama-ar", "livetrans-ar", "livetrans-ssbd", "livetrans-ws-ar",
           "livetrans-ws-ssbd")
DEFAULT_METHODS = METHODS[:3]
BASELINE = "llama-ar"
# llama-server's own ``timings`` (its prompt processing and generation), as reported
LLAMA_TIMINGS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms")
# what livetrans's drafts proposed and had accepted (its ``livetrans`` object), per update
DRAFT_COUNTS = ("ssbd_draft_tokens", "ssbd_accepted_tokens", "draft_tokens", "accepted_tokens")


@dataclass
class UpdateRecord:
    """One update as a speaker saw it, and what the server said of its time."""

    stream: int
    final: bool
    text: str
    wall_ms: float  # the client's: request sent -> answer read
    tokens: int
    timings: dict[str, float] = field(default_factory=dict)
    index: int = 0  # the update's place in its stream
    looped: bool = False  # llama-server: the client stopped a loop (``eval.bench.peer.prompt``)


@dataclass
class MethodRun:
    """One method's pass over every stream with ``speakers`` closed-loop clients."""

    method: str
    model: str
    speakers: int
    wall_s: float = 0.0
    records: list[UpdateRecord] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""  # what the first failed request said
    failed_updates: list[tuple[int, int]] = field(default_factory=list)  # (stream, index)
    passes: float | None = None  # the server's forward passes during the run
    pass_rows: float | None = None  # ... and the rows (tokens) they carried
    cpu_s: float | None = None  # the server process's CPU seconds during the run
    main_thread_cpu_s: float | None = None  # ... its main thread's (livetrans: event loop)

    def failed(self, why: str, update: tuple[int, int] | None = None) -> None:
        self.errors += 1
        self.first_error = self.first_error or why
        if update is not None:
            self.failed_updates.append(update)

    def answered(self) -> set[tuple[int, int]]:
        return {(r.stream, r.index) for r in self.records}


def common_updates(runs: Sequence[MethodRun]) -> set[tuple[int, int]]:
    """The updates every one of ``runs`` answered (a failed update is left out of the
    comparison: a method that fails updates must not look faster for it)."""
    sets = [r.answered() for r in runs]
    return set.intersection(*sets) if sets else set()


def common_ms(runs: Sequence[MethodRun], keys: set[tuple[int, int]]) -> float:
    """The client's ms over the updates in ``keys``, summed, the mean over ``runs``."""
    if not runs:
        return 0.0
    return sum(r.wall_ms for run in runs for r in run.records
               if (r.stream, r.index) in keys) / len(runs)


def finals(run: MethodRun, n: int) -> list[str]:
    out = [""] * n
    for r in run.records:
        if r.final:
            out[r.stream] = r.text
    return out


def outputs_by_stream(run: MethodRun, n: int) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in range(n)]
    for r in run.records:
        out[r.stream].append(r.text)
    return out


def pathological(texts: Sequence[str], sources: Sequence[str], lang: str) -> int:
    examples = FewShotFormat().shown_examples("en", lang)
    return sum(diagnose(t, s, lang, examples=examples) is not None
               for t, s in zip(texts, sources, strict=True))


def summarize(runs: list[MethodRun], streams: Sequence[Stream], lang: str) -> dict:
    """Per method: speed against llama-ar, quality of finals, flicker, time per part."""
    n = len(streams)
    refs = [s.reference or "" for s in streams]
    sources = [s.updates[-1].source for s in streams]
    by_method: dict[str, list[MethodRun]] = {}
    for r in runs:
        by_method.setdefault(r.method, []).append(r)
    base = by_method.get(BASELINE)
    base_finals = finals(base[0], n) if base else None
    base_wall = sum(r.wall_s for r in base) if base else None
    out: dict = {}
    for method, mruns in by_method.items():
        first = mruns[0]
        wall = sum(r.wall_s for r in mruns)
        updates = sum(len(r.records) for r in mruns)
        hyps = finals(first, n)
        keys = common_updates([*(base or []), *mruns])
        mine, theirs = common_ms(mruns, keys), common_ms(base or [], keys)
        row: dict = {
            "repeats": len(mruns), "updates": updates, "errors": sum(r.errors for r in mruns),
            "wall_s": round(wall, 2),
            "updates_per_s": round(updates / wall, 2) if wall else None,
            "ms_per_update": round(1000 * wall / updates, 1) if updates else None,
            # over the updates both sides answered: the client's ms summed, theirs / ours
            "common_updates": len(keys), "common_ms": round(mine, 1),
            "common_base_ms": round(theirs, 1),
            "speedup": round(theirs / mine, 3) if base and mine else None,
            "speedup_wall": round(base_wall / wall, 3) if base_wall and wall else None,
            "loop_stops": sum(r.looped for m in mruns for r in m.records),
            "chrF": round(ChrF().corpus_score(hyps, refs).score, 1),
            "pathological_finals": pathological(hyps, sources, lang),
            "ne": round(NormalizedErasure(ne_unit(lang)).corpus_score(
                outputs_by_stream(first, n)).score, 3),
            "output_tokens": sum(r.tokens for m in mruns for r in m.records),
        }
        if base_finals is not None and method != BASELINE:
            delta, low, high = paired_chrf_difference(base_finals, hyps, refs)
            row["chrF_diff"] = [round(delta, 1), round(low, 1), round(high, 1)]
            row["identical_finals"] = sum(a == b for a, b in zip(base_finals, hyps,
                                                                 strict=True))
        row["timings"] = mean_timings([r for m in mruns for r in m.records])
        row["timings"].update(pass_figures(mruns, updates))
        row["timings"].update(cpu_figures(mruns, updates))
        out[method] = row
    return out


def pass_figures(runs: Sequence[MethodRun], updates: int) -> dict[str, float]:
    """The server's forward passes per update, rows per pass and wall ms per pass: what
    the runs' counters say (nothing where a run has none). A pass shared by several
    speakers is counted once, so these show how full the passes were."""
    if not updates or any(r.passes is None or r.pass_rows is None for r in runs):
        return {}
    passes = sum(r.passes or 0.0 for r in runs)
    rows = sum(r.pass_rows or 0.0 for r in runs)
    if passes <= 0:
        return {}
    return {"passes_per_update": round(passes / updates, 2),
            "rows_per_pass": round(rows / passes, 2),
            "ms_per_pass": round(1000 * sum(r.wall_s for r in runs) / passes, 2)}


def cpu_figures(runs: Sequence[MethodRun], updates: int) -> dict[str, float]:
    """CPU ms an update of the server process and of its main thread alone (nothing where
    a run has none): on a machine the model's threads fill, time the main thread takes is
    time they lose."""
    if not updates or any(r.cpu_s is None or r.main_thread_cpu_s is None for r in runs):
        return {}
    return {"server_cpu_ms": round(1000 * sum(r.cpu_s or 0.0 for r in runs) / updates, 1),
            "main_thread_cpu_ms": round(
                1000 * sum(r.main_thread_cpu_s or 0.0 for r in runs) / updates, 1)}


def mean_timings(records: Sequence[UpdateRecord]) -> dict[str, float]:
    """Mean per update of every reported part, plus the client's wall time and what the
    server's parts leave of it (``outside_ms``: HTTP, JSON, the client, the event loop)."""
    if not records:
        return {}
    keys = sorted({k for r in records for k in r.timings})
    means = {k: round(statistics.fmean(r.timings.get(k, 0.0) for r in records), 2)
             for k in keys}
    means["client_wall_ms"] = round(statistics.fmean(r.wall_ms for r in records), 2)
    inside = means.get("server_ms")
    if inside is None and "llama_predicted_ms" in means:  # its two parts are all it reports
        inside = means["llama_prompt_ms"] + means["llama_predicted_ms"]
    if inside is not None:
        means["outside_ms"] = round(means["client_wall_ms"] - inside, 2)
    return means


def speed_table(report: dict) -> Table:
    t = Table(["file", "speakers", "method", "updates", "errors", "wall s", "ms/update",
               f"speedup vs {BASELINE}*", "chrF", f"chrF diff vs {BASELINE} [95%]",
               "pathological finals", "NE"],
              title=f"Live re-translation, closed loop (*over the updates both {BASELINE} "
                    "and the method answered)")
    for (model, speakers), methods in report.items():
        for method, row in methods.items():
            diff = row.get("chrF_diff")
            t.add(model, speakers, method, row["updates"], row["errors"], row["wall_s"],
                  row["ms_per_update"], row["speedup"], row["chrF"],
                  f"{diff[0]:+.1f} [{diff[1]:+.1f}, {diff[2]:+.1f}]" if diff else "-",
                  row["pathological_finals"], row["ne"])
    return t


def breakdown_table(report: dict) -> Table:
    """Where an update's time goes: mean ms per update of each part, every method."""
    columns = [(model, speakers, method) for (model, speakers), methods in report.items()
               for method in methods]
    t = Table(["part", *(f"{m} {s}sp {meth}" for m, s, meth in columns)],
              title="Mean per update (ms; rows, steps and passes as counts; the "
                    "last two per forward pass)")
    rows = [*PARTS, "server_ms", "prefill_rows", "verify_rows", "decode_rows",
            "decode_steps", "generations", *DRAFT_COUNTS, "retries", "prompt_mismatch",
            "loop_stops",
            *(f"llama_{k}" for k in LLAMA_TIMINGS),
            "client_wall_ms", "outside_ms", "server_cpu_ms", "main_thread_cpu_ms",
            "passes_per_update", "rows_per_pass", "ms_per_pass"]
    for part in rows:
        label = f"  ({part} inside)" if part in NESTED else part
        cells = []
        for model, speakers, method in columns:
            value = report[(model, speakers)][method]["timings"].get(part)
            cells.append("-" if value is None else f"{value:g}")
        if any(c != "-" for c in cells):
            t.add(label, *cells)
    return t
