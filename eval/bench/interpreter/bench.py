"""The server as a live interpreter: how long after a speaker stops does the translation
appear, and when is it heard?

    livetrans bench interpreter [--speakers 1,2] [--sentences 4] [--source en --target de]
                                [--out results/interpreter]

One in-process server (``eval.local_server.LocalServer``: the default model, Whisper base,
the server's voices). Each speaker is a session of OpenAI's realtime translation API
(``/v1/realtime/translations``) through the official ``openai`` SDK (async): espeak-ng
says ``--sentences`` sentences in ``--source`` with ``--pause-s`` of silence after each,
sent as 24 kHz PCM16 in 200 ms appends in real time; the output language is ``--target``,
spoken by the server's voice for it (``--voice-engine``: auto takes Piper's joe for
English, espeak-ng for German). With several speakers they start ``--stagger-s`` apart
(speaker k says the sentences rotated by k), so their speech overlaps as in a meeting.
Runs for each ``--speakers`` count follow each other on the same server.

Per sentence, from the moment the 200 ms append that carries its last sample was sent
(speech end), on the wall clock:

* first word: the first ``session.output_transcript.delta`` of its segment (append-only
  commits come from partials, so this can be negative: text before the speaker stopped);
* first audio: the first ``session.output_audio.delta`` after that word;
* final: the ``session.input_transcript.delta`` that comes with the final translation.

How events are tied to sentences is in ``eval.bench.interpreter.talk``. Figures are p50 / p90
over every speaker's sentences, with the machine (CPU model, cores) they were measured
on: a quiet machine, since everything runs in real time. Writes ``interpreter_bench.json``
(every sentence's figures and texts) and ``interpreter_bench.md`` under ``--out``; the
table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from eval.bench.interpreter.talk import (
    FRAME,
    LONG_SENTENCES,
    RATE,
    SENTENCES,
    Talk,
    Timed,
    compose,
    latencies,
)
from eval.tables import Table

LIMIT_S = 600  # a bound against a hung session, never a latency
METRICS = ("first_word_s", "first_audio_s", "final_s")


def machine() -> dict[str, Any]:
    """Where the figures were measured: they mean little without it."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.platform(),
            "load_1m": round(os.getloadavg()[0], 2)}  # other work skews real-time figures


async def speaker(url: str, talk: Talk, source: str, target: str, delay_s: float,
                  ) -> tuple[list[Timed], list[float], list[str]]:
    """One realtime session: the talk in real time after ``delay_s``; every event timed,
    the wall-clock second each sentence's speech end was sent, and the error codes."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    events: list[Timed] = []
    errors: list[str] = []
    ends = set(talk.end_frames())
    ends_at: list[float] = []
    await asyncio.sleep(delay_s)
    async with client.realtime.translations.connect(model="livetrans") as conn:
        await conn.send({"type": "session.update", "session": {  # type: ignore[arg-type]
            "audio": {"output": {"language": target},
                      "input": {"transcription": {"model": "whisper"}}},
            "livetrans": {"source_language": source}}})

        async def speak() -> None:
            pcm = talk.pcm.tobytes()
            t0 = time.perf_counter()
            for n, i in enumerate(range(0, len(pcm), FRAME * 2)):
                await asyncio.sleep(max(0.0, t0 + n * FRAME / RATE - time.perf_counter()))
                await conn.send({"type": "session.input_audio_buffer.append",
                                 "audio": base64.b64encode(pcm[i:i + FRAME * 2]).decode()})
                if n in ends:
                    ends_at.append(time.perf_counter())
            await conn.send({"type": "session.close"})

        sender = asyncio.create_task(speak())
        async with asyncio.timeout(LIMIT_S):
            async for event in conn:
                kind = event.type
                events.append(Timed(kind, time.perf_counter(), getattr(event, "delta", "")
                                    if "transcript" in kind else ""))
                if kind == "error":
                    errors.append(event.error.code or "error")  # type: ignore[union-attr]
                if kind == "session.closed":
                    break
        await sender
    return events, ends_at, errors


async def session_run(url: str, talks: list[Talk], args: argparse.Namespace,
                      ) -> list[dict[str, Any]]:
    """Every speaker at once, staggered; one row per sentence per speaker."""
    results = await asyncio.gather(*(
        speaker(url, talk, args.source, args.target, k * args.stagger_s)
        for k, talk in enumerate(talks)))
    rows = []
    for k, (talk, (events, ends_at, errors)) in enumerate(zip(talks, results, strict=True)):
        for row in latencies(events, talk, ends_at):
            rows.append({"speaker": k, **row, "session_errors": errors})
        if errors:  # voice_dropped, audio_overrun...: the figures come with them
            print(f"speaker {k}: errors {', '.join(errors)}", file=sys.stderr)
    return rows


def target_voice(server: Any, lang: str) -> Any:
    """The voice that speaks the output language on this server (None: none does)."""
    from app.voice.base import VoiceUnavailable

    try:
        return server.state.voices.resolve(lang).info if server.state.voices else None
    except VoiceUnavailable:
        return None


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def summary(speakers: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"speakers": speakers, "sentences": len(rows),
                           "missed": sum(1 for r in rows if r["final_s"] is None)}
    for metric in METRICS:
        values = [r[metric] for r in rows if r[metric] is not None]
        out[metric] = {"p50": percentile(values, 50), "p90": percentile(values, 90),
                       "n": len(values)}
    return out


def table(summaries: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace,
          ) -> Table:
    title = (f"speech end -> output, seconds, p50 / p90 ({args.source}->{args.target}, "
             f"{info['cpu']}, {info['cores']} cores, load {info['load_1m']} at the start)")
    t = Table(["speakers", "sentences", "missed", "first word", "first audio", "final",
               "load after"], title=title)
    for s in summaries:
        t.add(s["speakers"], s["sentences"], s["missed"],
              *(f"{_cell(s[m]['p50'])} / {_cell(s[m]['p90'])}" for m in METRICS),
              s.get("load_1m_after", "-"))
    return t


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livetrans bench interpreter",
                                description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 2)[2].replace("``", ""),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--speakers", default="1,2",
                   help="comma-separated speaker counts, one run each (default 1,2)")
    p.add_argument("--sentences", type=int, default=4,
                   help=f"sentences each speaker says (1-{len(SENTENCES['en'])}, default 4)")
    p.add_argument("--source", choices=sorted(SENTENCES), default="en",
                   help="the speakers' language (default en)")
    p.add_argument("--target", default="de", help="the output language (default de)")
    p.add_argument("--long", action="store_true",
                   help="long sentences (6-9 s of speech each, up to "
                        f"{len(LONG_SENTENCES['en'])}) instead of short ones (about 3 s)")
    p.add_argument("--pause-s", type=float, default=2.0,
                   help="silence after each sentence (default 2.0)")
    p.add_argument("--stagger-s", type=float, default=1.5,
                   help="seconds between speakers' starts (default 1.5)")
    p.add_argument("--voice-engine", default="auto",
                   help="the server's --voice-engine (default auto)")
    p.add_argument("--asr-threads", type=int, default=1,
                   help="the server's --asr-threads (default 1)")
    p.add_argument("--out", type=Path, default=Path("results/interpreter"),
                   help="folder for interpreter_bench.json and .md "
                        "(default results/interpreter)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        counts = [int(c) for c in args.speakers.split(",") if c.strip()]
    except ValueError:
        _parser().error(f"--speakers: whole numbers, e.g. 1,2 (got {args.speakers!r})")
    if not counts or min(counts) < 1:
        _parser().error("--speakers: at least one speaker per run")
    pool = (LONG_SENTENCES if args.long else SENTENCES)[args.source]
    if not 1 <= args.sentences <= len(pool):
        _parser().error(f"--sentences: 1 to {len(pool)}")
    from eval.local_server import LocalServer

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, load {info['load_1m']}",
          file=sys.stderr)
    base = pool
    talks = [compose((base[k:] + base[:k])[:args.sentences], args.source, 1.0, args.pause_s)
             for k in range(max(counts))]
    print("starting the server (model, Whisper, voices)", file=sys.stderr)
    summaries, runs = [], []
    with LocalServer(max_audio_speakers=max(counts), max_live_sessions=max(8, max(counts)),
                     asr_threads=args.asr_threads, voice_engine=args.voice_engine,
                     max_source_chars=2000) as server:
        voice = target_voice(server, args.target)
        for n in counts:
            print(f"{n} speaker(s): {args.sentences} sentences each, real time",
                  file=sys.stderr)
            rows = asyncio.run(session_run(server.url, talks[:n], args))
            summaries.append({**summary(n, rows), "load_1m_after": round(os.getloadavg()[0], 2)})
            runs.append({"speakers": n, "rows": rows})
            print(f"  done: {summaries[-1]}", file=sys.stderr)
    report = {"machine": info, "voice": voice and {"engine": voice.engine,
                                                   "voice": voice.voice},
              "settings": {k: str(v) for k, v in vars(args).items()},
              "summaries": summaries, "runs": runs}
    t = table(summaries, info, args)
    print(t.markdown())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "interpreter_bench.json").write_text(json.dumps(report, indent=2,
                                                                ensure_ascii=False) + "\n")
    (args.out / "interpreter_bench.md").write_text(
        f"# livetrans bench interpreter\n\nMachine: {info['cpu']}, {info['cores']} cores "
        f"({info['system']}), 1-minute load {info['load_1m']} at the start. Voice: "
        f"{report['voice']}.\n\n{t.markdown()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
