"""Speakers at a real pace: ``llama-server-bench --live --open-loop``.

    livetrans bench peer --live --open-loop --llama-server PATH/llama-server \\
        --flores-dir DIR --langs de --speakers 1,2,4,8 --trimmed auto --threads 2

The closed loop (``eval.bench.peer.live``) measures throughput: a speaker sends its next update
the moment the last is answered. People at an event feel something else: how late a
caption is while the speakers talk at their own pace. Here each speaker says its
sentences at ``--period`` s a lag-k update (the final at the sentence end), the speakers'
starts staggered, and every server gets the same schedule and the same client policy
(``eval.bench.peer.open_loop_sched``: never two requests in flight, the newest partial sent when the
last answer arrived, skipped partials counted). Latency runs from when the words were said
(the scheduled time) to when their caption arrived.

For each file (the GGUF, and the trimmed copy with ``--trimmed``) and speaker count:
llama-server AR (a slot a speaker), livetrans AR and livetrans SSBD, one after another on
the same sentences (the order turned at each count), each with p50/p90/p99 of update ->
caption and final -> final caption, the partials skipped, the errors, and the quality of
the same run (chrF of the finals with a 95% paired-bootstrap interval against
llama-server, pathological finals, NE); then the capacity: the most speakers within
``--partial-bound`` / ``--final-bound`` at p90. Both servers are sized for the most
speakers (``-np`` / ``--parallel``) and stay up for every count, as an organiser runs one
server for the day. ``--variant NAME=ARGS`` starts one more livetrans server with other
serve options, whose methods run in the same rotation ("livetrans-ssbd [NAME]"): a
setting against the defaults in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from app.model_files import resolve_model_path
from eval.bench.peer.figures import BASELINE, MethodRun, summarize
from eval.bench.peer.live import Speaker, describe_error, speaker_for
from eval.bench.peer.open_loop_sched import (
    Caption,
    Spoken,
    capacity,
    latency_figures,
    schedule,
    speak,
    staggered_starts,
)
from eval.bench.peer.prompt import STOP_RULE, PinnedPrompt
from eval.bench.peer.samples import load_samples
from eval.bench.peer.servers import (
    describe_machine,
    machine,
    resolve_trimmed,
    servers_for,
)
from eval.datasets.streams import Stream
from eval.tables import Table

LEAD_S = 0.5  # the clock starts this long after the clients are set up
QUALITY = ("chrF", "chrF_diff", "pathological_finals", "ne")
WARM_UP = "Good morning, everyone."
WARM_UP_STREAM = 1_000_000  # the warm-up's sessions, apart from the run's sentences


def talk_of(pool: Sequence[Stream], speakers: int, per_speaker: int) -> list[Stream]:
    """The run's sentences: speaker k says those at k, k + S, k + 2S, ... (the pool taken
    in turn, from the start again when it runs out)."""
    return [pool[p % len(pool)] for p in range(speakers * per_speaker)]


def scripts_of(talk: Sequence[Stream], speakers: int, lag: int, period: float,
               stagger: float | None) -> list[list[Spoken]]:
    starts = staggered_starts(speakers, period, stagger)
    return [schedule([(p, [(u.source, u.is_final) for u in talk[p].updates])
                      for p in range(k, len(talk), speakers)], lag, period, starts[k])
            for k in range(speakers)]


async def drive(speaker: Speaker, scripts: Sequence[Sequence[Spoken]], run: MethodRun,
                ) -> tuple[list[Caption], int]:
    """Every speaker's client at once on one shared clock: the captions and the partials
    skipped, all speakers together."""
    limits = httpx.Limits(max_connections=len(scripts) + 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await warm_up(speaker, client, len(scripts))
        t0 = time.perf_counter() + LEAD_S

        def clock() -> float:
            return time.perf_counter() - t0

        def sender(slot: int):  # noqa: ANN202 - an async callable
            async def send(u: Spoken) -> bool:
                try:
                    run.records.append(await speaker.update(
                        client, u.stream, u.source, u.final, index=u.index, slot=slot))
                    return True
                except (httpx.HTTPError, KeyError, ValueError) as exc:
                    run.failed(describe_error(exc), (u.stream, u.index))
                    return False
            return send

        done = await asyncio.gather(*(speak(script, sender(k), clock, asyncio.sleep)
                                      for k, script in enumerate(scripts)))
        run.wall_s = clock()
    return [c for caps, _ in done for c in caps], sum(skipped for _, skipped in done)


async def warm_up(speaker: Speaker, client: httpx.AsyncClient, speakers: int) -> None:
    """One untimed update a speaker before the clock starts, on the speaker's slot: every
    server has the prompt's fixed prefix in its cache (each llama-server slot its own),
    as a caption server has after its first minute, whichever method ran before."""
    for k in range(speakers):
        try:
            await speaker.update(client, WARM_UP_STREAM + k, WARM_UP, True, slot=k)
        except (httpx.HTTPError, KeyError, ValueError):
            pass  # the timed run counts what fails


def run_open_loop(args: argparse.Namespace) -> tuple[list[str], dict]:
    model = resolve_model_path(args.model_a)
    lang = args.langs[0]
    pool = [s for sample in load_samples(args, lang) for s in sample.streams]
    files = [model]
    trimmed = resolve_trimmed(args.trimmed, model, lang)
    if trimmed is not None:
        files.append(trimmed)
    prompts = {file: PinnedPrompt(file, lang, args.prompt_format) for file in files}
    about = [describe_machine(machine()), prompts[model].describe(),
             f"stopping rule: {STOP_RULE}",
             f"open loop: each speaker a lag-{args.lag} update every {args.period} s, the "
             f"final at the sentence end, {args.sentences_per_speaker} sentences a speaker, "
             "starts staggered by " + (f"{args.stagger} s" if args.stagger is not None
                                       else "period / speakers")
             + "; a client never has two requests in flight and sends the newest partial "
             "when the last answer arrived (finals are never skipped); llama-server: a "
             "slot a speaker (id_slot)",
             f"capacity: the most speakers with partial p90 <= {args.partial_bound} s and "
             f"final p90 <= {args.final_bound} s, every smaller count within them too"]
    for line in about:
        print(line, file=sys.stderr, flush=True)
    report: dict = {}
    for file in files:
        report.update(run_file(args, file, pool, lang, prompts[file]))
    return about, report


def run_file(args: argparse.Namespace, file: Path, pool: Sequence[Stream], lang: str,
             prompt: PinnedPrompt) -> dict:
    """Every speaker count and method on one file: the servers sized for the most speakers
    (``-np`` / ``--parallel``), as an organiser runs one for the day, up for all counts;
    one more livetrans server per ``--variant``, its methods labelled "METHOD [NAME]"."""
    with servers_for(args, file, max(args.speakers)) as servers:
        # (label, method, url)
        order = [(label, method, server.url)
                 for label, method, server in servers.order(args.methods, BASELINE)]
        return {(file.name, speakers): run_count(args, file.name, speakers, pool, lang,
                                                 prompt, order, servers.model_id, turn=n)
                for n, speakers in enumerate(args.speakers)}


def run_count(args: argparse.Namespace, name: str, speakers: int, pool: Sequence[Stream],
              lang: str, prompt: PinnedPrompt, order: Sequence[tuple[str, str, str]],
              model_id: str, turn: int) -> dict:
    """Every method at one speaker count: the same talk and schedule, one method after
    another (the order turned at each count). ``order``: (label, method, server URL)."""
    talk = talk_of(pool, speakers, args.sentences_per_speaker)
    scripts = scripts_of(talk, speakers, args.lag, args.period, args.stagger)
    turned = list(order[turn % len(order):]) + list(order[:turn % len(order)])
    runs, rows = [], {}
    for label, method, url in turned:
        speaker = speaker_for(method, url, lang, prompt, model_id, run_tag=f"ol{speakers}")
        run = MethodRun(label, name, speakers)
        captions, skipped = asyncio.run(drive(speaker, scripts, run))
        runs.append(run)
        rows[label] = {**latency_figures(captions), "sent": len(captions),
                       "skipped": skipped, "errors": run.errors,
                       "wall_s": round(run.wall_s, 2),
                       # other work on the machine shows here: a run under it is no
                       # measurement
                       "load_1m_after": round(os.getloadavg()[0], 2)}
        print(f"{name} {speakers} speakers {label}: {fmt_row(rows[label])}"
              + (f" (first error: {run.first_error})" if run.errors else ""),
              file=sys.stderr, flush=True)
    quality = summarize(runs, talk, lang)
    for label, row in rows.items():
        row.update({k: quality[label][k] for k in QUALITY if k in quality[label]})
        row["timings"] = quality[label]["timings"]  # the mean update's parts
    return {label: rows[label] for label, _, _ in order}


def fmt_row(row: dict) -> str:
    return (f"partial p50/p90/p99 {row['partial_p50']}/{row['partial_p90']}/"
            f"{row['partial_p99']} s, final {row['final_p50']}/{row['final_p90']}/"
            f"{row['final_p99']} s, {row['sent']} sent, {row['skipped']} skipped, "
            f"{row['errors']} errors, load {row['load_1m_after']}")


def capacities(report: dict, partial_bound: float, final_bound: float) -> dict:
    """(file, method) -> the capacity over the speaker counts measured."""
    by: dict[tuple[str, str], dict[int, dict]] = {}
    for (file, speakers), methods in report.items():
        for method, row in methods.items():
            by.setdefault((file, method), {})[speakers] = row
    return {key: capacity(rows, partial_bound, final_bound) for key, rows in by.items()}


def latency_table(report: dict) -> Table:
    t = Table(["file", "speakers", "method", "partial p50 / p90 / p99 s",
               "final p50 / p90 / p99 s", "sent", "skipped partials", "errors", "chrF",
               f"chrF diff vs {BASELINE} [95%]", "pathological finals", "NE",
               "load after"],
              title="Open loop: from when the words were said to their caption")

    def three(row: dict, kind: str) -> str:
        return " / ".join("-" if row[f"{kind}_p{q}"] is None else f"{row[f'{kind}_p{q}']:.2f}"
                          for q in (50, 90, 99))

    for (file, speakers), methods in report.items():
        for method, row in methods.items():
            diff = row.get("chrF_diff")
            t.add(file, speakers, method, three(row, "partial"), three(row, "final"),
                  row["sent"], row["skipped"], row["errors"], row.get("chrF", "-"),
                  f"{diff[0]:+.1f} [{diff[1]:+.1f}, {diff[2]:+.1f}]" if diff else "-",
                  row.get("pathological_finals", "-"), row.get("ne", "-"),
                  row.get("load_1m_after", "-"))
    return t


def capacity_table(report: dict, partial_bound: float, final_bound: float) -> Table:
    counts = sorted({speakers for _, speakers in report})
    t = Table(["file", "method", "capacity (speakers)", "measured at"],
              title=f"Capacity: the most speakers with partial p90 <= {partial_bound} s and "
                    f"final p90 <= {final_bound} s")
    for (file, method), cap in capacities(report, partial_bound, final_bound).items():
        t.add(file, method, cap, ",".join(map(str, counts)))
    return t
