"""Live re-translation against llama.cpp's own server: ``llama-server-bench --live``.

    livetrans bench peer --live --llama-server PATH/llama-server \\
        --flores-dir DIR --langs de --limit 20 --speakers 1,8 --trimmed auto

What a caption server does all day, measured against the plainest peer: FLORES lag-k
streams (the source revealed k words at a time), every update re-translated, by

* ``llama-ar``: llama-server (``-np C``), each update sent to ``/completion`` with the
  project's few-shot prompt, greedy, stopping at the newline, prompt cache on;
* ``livetrans-ar``: livetrans (``--parallel C``), each update a translation request of a
  session with no drafts (``drafters: []``): re-translation from scratch;
* ``livetrans-ssbd``: the same with the server's defaults (the previous translation
  verified as a draft, drafters after it);
* ``livetrans-ws-ar`` and ``livetrans-ws-ssbd`` (asked for with ``--methods``): the same
  two over the WebSocket, one ``/v1/live`` connection a speaker, a segment a stream,
  ``partial`` / ``final`` frames, each sent when the last caption arrived.

Both servers get the same prompt token ids (``--prompt-format``, pinned), the same token
cap and the same stopping rule, llama-server's requests keep a speaker on its slot
(``id_slot``), and failed updates are counted and left out of the speedup
(``eval.bench.peer.prompt``, ``eval.bench.peer.figures``). ``C`` closed-loop speakers share the
streams (a speaker sends its next update when the answer to the last arrived);
``--samples`` and ``--acl-dir`` add samples (``eval.bench.peer.samples``), ``--open-loop`` paces
the speakers (``eval.bench.peer.open_loop``). Both servers stay up; the methods run one after
another
(the order rotated on each repeat) on one GGUF file, then on the trimmed file when
``--trimmed`` names one (``auto``: the copy ``serve --langs en,X`` builds). The client
runs in its own process, so neither server shares its interpreter. ``--variant NAME=ARGS``
starts one more livetrans server with other serve options beside them, and its methods
join the same rotation ("livetrans-ssbd [NAME]"): a setting is compared with the defaults
in one run, not in two runs on a machine that drifts.

Printed: per file and speaker count, each method's wall time, updates/s and ms per update
against llama-ar (the ratio), chrF of the finals with a 95% paired-bootstrap interval
against llama-ar, pathological finals and normalized erasure; and where an update's time
goes: livetrans's own per-update ``timings`` (``app.engine.timings``) next to
llama-server's ``timings`` for the same streams, and each server's forward passes per
update, rows per pass and ms per pass (read from its ``/metrics`` before and after a
run: llama-server's ``n_decode_total`` and tokens, livetrans's step scheduler's
passes and rows), and the CPU time its process spent an update, its main thread's apart
(``eval.process_cpu``; in ``livetrans serve`` the main thread is the event loop, in
llama-server it is the one that runs the slots and ``llama_decode``). ``--profile DIR``
records a py-spy profile of the livetrans server during each livetrans run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from app.model_files import resolve_model_path
from app.usage import UsageError, comma_list, positive_int
from clients.live_session import LiveSession
from eval.bench.peer.figures import (
    BASELINE,
    DEFAULT_METHODS,
    DRAFT_COUNTS,
    LLAMA_TIMINGS,
    METHODS,
    MethodRun,
    UpdateRecord,
    breakdown_table,
    speed_table,
    summarize,
)
from eval.bench.peer.open_loop_options import add_open_loop_options, check_open_loop_options
from eval.bench.peer.prompt import STOP_RULE, PinnedPrompt, llama_complete, now_ms
from eval.bench.peer.samples import Sample, add_sample_options, load_samples, spread_table
from eval.bench.peer.servers import (
    Profiler,
    ServerProcess,
    describe_machine,
    machine,
    pass_counters,
    prometheus_values,
    resolve_trimmed,
    servers_for,
)
from eval.datasets.streams import Stream
from eval.process_cpu import cpu_times

# -- one update, per method ---------------------------------------------------------------

class Speaker:
    """The requests of one method; ``update`` returns what the speaker saw."""

    def __init__(self, method: str, url: str, lang: str, prompt: PinnedPrompt,
                 model_id: str, run_tag: str = "") -> None:
        self.method, self.url, self.lang, self.prompt = method, url, lang, prompt
        self.model_id = model_id
        # a repeat's sessions are new ones: the same session sent its stream again would
        # be a late update (409) to the server
        self.run_tag = run_tag

    async def update(self, client: httpx.AsyncClient, stream: int, source: str,
                     final: bool, index: int = 0, slot: int | None = None) -> UpdateRecord:
        """One update; ``slot`` is the speaker's llama-server slot (``id_slot``)."""
        t0 = time.perf_counter()
        if self.method == BASELINE:
            done = await llama_complete(client, self.url, self.prompt, source, slot)
            wall = now_ms(t0)
            t = done.timings
            figures = {f"llama_{k}": float(t.get(k, 0.0)) for k in LLAMA_TIMINGS}
            figures["loop_stops"] = float(done.looped)
            return UpdateRecord(stream, final, done.text.strip(), wall, len(done.tokens),
                                figures, index=index, looped=done.looped)
        body: dict = {"model": self.model_id,
                      "messages": [{"role": "user", "content": source}],
                      "target_lang": self.lang, "source_lang": "en",
                      "session_id": re.sub(r"[^A-Za-z0-9-]", "-",
                                           f"{self.method}-{self.run_tag}-{stream}"),
                      "is_final": final,
                      "context": 0, "max_tokens": self.prompt.cap(source)}
        if self.method == "livetrans-ar":
            body["drafters"] = []
        elif "@" in self.method:  # livetrans-ssbd@previous+ngram: those drafters only
            body["drafters"] = [d for d in self.method.split("@", 1)[1].split("+") if d]
        resp = await client.post(f"{self.url}/v1/chat/completions", json=body)
        wall = now_ms(t0)
        resp.raise_for_status()
        data = resp.json()
        info = data.get("livetrans") or {}
        counts = {k: float(info.get(k) or 0) for k in DRAFT_COUNTS}
        counts["retries"] = float(bool(info.get("retried")))
        # the pinned prompt, checked: livetrans's prompt tokens against the ids llama-server
        # is sent (a retried final's stronger prompt differs, and is counted apart)
        if not info.get("retried"):
            counts["prompt_mismatch"] = float(
                int(data["usage"]["prompt_tokens"]) != len(self.prompt.ids(source)))
        return UpdateRecord(stream, final, data["choices"][0]["message"]["content"].strip(),
                            wall, int(data["usage"]["completion_tokens"]),
                            {**(info.get("timings") or {}), **counts}, index=index)

    @asynccontextmanager
    async def session(self, client: httpx.AsyncClient) -> AsyncIterator[object]:
        """What one speaker keeps for all its streams (here: the shared HTTP client)."""
        yield client

    async def stream(self, handle: object, i: int, stream: Stream, run: MethodRun,
                     slot: int | None = None) -> None:
        """One stream's updates, each sent when the answer to the last has arrived."""
        client = handle
        for j, u in enumerate(stream.updates):
            try:
                run.records.append(await self.update(client, i, u.source, u.is_final,
                                                     index=j, slot=slot))
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                run.failed(describe_error(exc), (i, j))


class LiveSpeaker(Speaker):
    """``livetrans-ws-*``: a speaker's one WebSocket ``/v1/live`` connection for all its
    streams, as a captioning client keeps one for a talk: a stream is a segment, its
    updates ``partial`` / ``final`` frames, each sent when the last one's caption arrived
    (so none is coalesced); the caption's ``stats`` carry the timings."""

    @asynccontextmanager
    async def session(self, client: httpx.AsyncClient) -> AsyncIterator[object]:
        start: dict = {"target_lang": self.lang, "source_lang": "en", "context": 0}
        if self.method == "livetrans-ws-ar":
            start["drafters"] = []
        url = self.url.replace("http://", "ws://") + "/v1/live"
        async with LiveSession(url, open_timeout=10) as live:
            await asyncio.wait_for(live.start(**start), 600)
            yield live
            await live.stop()
            await self._frame(live, "done")

    async def stream(self, handle: object, i: int, stream: Stream, run: MethodRun,
                     slot: int | None = None) -> None:
        import websockets

        live = handle
        j = 0
        try:
            for j, u in enumerate(stream.updates):
                t0 = time.perf_counter()
                await live.send_update("final" if u.is_final else "partial", u.source,
                                       segment=i)
                caption = await self._frame(live, "caption")
                wall = (time.perf_counter() - t0) * 1000
                stats = caption.get("stats") or {}
                counts = {k: float(stats.get(k) or 0) for k in DRAFT_COUNTS}
                tokens = int(stats.get("accepted_tokens") or 0) + \
                    int(stats.get("new_tokens") or 0)
                run.records.append(UpdateRecord(i, u.is_final, caption["text"].strip(), wall,
                                                tokens, {**(stats.get("timings") or {}),
                                                         **counts}, index=j))
        except (OSError, websockets.WebSocketException, KeyError, ValueError,
                RuntimeError) as exc:
            run.failed(f"{type(exc).__name__}: {exc}", (i, j))

    @staticmethod
    async def _frame(live: LiveSession, kind: str) -> dict:
        """The next frame of ``kind``; an ``error`` frame raises with its message."""
        while True:
            msg = await live.recv(timeout=600)
            if msg.get("type") == kind:
                return msg
            if msg.get("type") == "error":
                raise RuntimeError(f"{msg.get('code')}: {msg.get('message')}")


def describe_error(exc: Exception) -> str:
    detail = exc.response.text[:200] if isinstance(exc, httpx.HTTPStatusError) \
        and exc.response.is_stream_consumed else ""
    return f"{type(exc).__name__}: {exc} {detail}".strip()


def speaker_for(method: str, url: str, lang: str, prompt: PinnedPrompt,
                model_id: str, run_tag: str = "") -> Speaker:
    cls = LiveSpeaker if method.startswith("livetrans-ws-") else Speaker
    return cls(method, url, lang, prompt, model_id, run_tag)


async def run_method(speaker: Speaker, streams: Sequence[Stream], speakers: int,
                     run: MethodRun) -> MethodRun:
    """Every stream, ``speakers`` at a time, each speaker in a closed loop."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(streams)):
        queue.put_nowait(i)

    async def one(client: httpx.AsyncClient, slot: int) -> None:
        try:
            async with speaker.session(client) as handle:
                while not queue.empty():
                    i = queue.get_nowait()
                    await speaker.stream(handle, i, streams[i], run, slot=slot)
        except Exception as exc:  # noqa: BLE001 - a speaker that cannot connect: counted, said
            run.failed(f"{type(exc).__name__}: {exc}")

    limits = httpx.Limits(max_connections=speakers + 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(client, k) for k in range(speakers)))
        run.wall_s = time.perf_counter() - t0
    return run


# -- the run ------------------------------------------------------------------------------

def run_live(args: argparse.Namespace) -> tuple[list[str], dict]:
    """Every method on every file, speaker count and sample: the lines that say how the
    run was made (the machine, the prompt, the stopping rule) and the figures."""
    model = resolve_model_path(args.model_a)
    lang = args.langs[0]
    samples = load_samples(args, lang)
    files = [model]
    trimmed = resolve_trimmed(args.trimmed, model, lang)
    if trimmed is not None:
        files.append(trimmed)
    profiler = Profiler(args.profile)
    prompts = {file: PinnedPrompt(file, lang, args.prompt_format) for file in files}
    about = [describe_machine(machine()), prompts[model].describe(), f"stopping rule: {STOP_RULE}",
             "llama-server: -np SPEAKERS, each speaker on its own slot (id_slot), prompt cache on",
             "samples: " + ", ".join(f"{s.name} ({sum(len(x.updates) for x in s.streams)} "
                                     "updates)" for s in samples)]
    for line in about:
        print(line, file=sys.stderr, flush=True)
    report: dict = {}
    for file in files:
        for speakers in args.speakers:
            per_sample = run_file(args, file, speakers, samples, lang, profiler,
                                  prompts[file])
            for sample, figures in zip(samples, per_sample, strict=True):
                label = file.name if len(samples) == 1 else f"{file.name} {sample.name}"
                for row in figures.values():
                    row["file"], row["sample"] = file.name, sample.name
                report[(label, speakers)] = figures
    return about, report


def run_file(args: argparse.Namespace, file: Path, speakers: int, samples: Sequence[Sample],
             lang: str, profiler: Profiler, prompt: PinnedPrompt) -> list[dict]:
    """Every method on one file at one speaker count, sample by sample: llama-server and
    one livetrans server (and one more per ``--variant``) up together, the runs one after
    another, their order rotated on each repeat."""
    with servers_for(args, file, speakers) as servers:
        order = servers.order(args.methods, BASELINE)
        out = []
        for k, sample in enumerate(samples):
            runs: list[MethodRun] = []
            for repeat in range(args.repeats):
                turn = (repeat + k) % len(order)
                for label, method, server in order[turn:] + order[:turn]:
                    speaker = speaker_for(method, server.url, lang, prompt, servers.model_id,
                                          run_tag=f"s{k}r{repeat}")
                    run = MethodRun(label, file.name, speakers)
                    measure(run, server, server is servers.llama, profiler,
                            f"{file.stem}-{speakers}sp-{label}-{k}-{repeat}",
                            lambda s=speaker, r=run, st=sample.streams:
                            asyncio.run(run_method(s, st, speakers, r)))
                    runs.append(run)
                    print(f"{file.name} {sample.name} {speakers} speakers {label}: "
                          f"{run.wall_s:.1f} s, {len(run.records)} updates, {run.errors} "
                          "errors" + (f" (first: {run.first_error})" if run.errors else ""),
                          file=sys.stderr, flush=True)
            out.append(summarize(runs, sample.streams, lang))
        return out


def measure(run: MethodRun, server: ServerProcess, is_llama: bool, profiler: Profiler,
            name: str, work: Callable[[], object]) -> None:
    """``work`` with the server's pass counters and CPU time read around it (and a py-spy
    profile of a livetrans server with ``--profile``)."""
    recorder = None if is_llama else profiler.start(
        server.proc.pid, re.sub(r"[^A-Za-z0-9.-]+", "-", name))
    before = pass_counters(server.url, is_llama)
    cpu_before = cpu_times(server.proc.pid)
    try:
        work()
    finally:
        profiler.stop(recorder)
    after = pass_counters(server.url, is_llama)
    cpu_after = cpu_times(server.proc.pid)
    if before is not None and after is not None:
        run.passes, run.pass_rows = after[0] - before[0], after[1] - before[1]
    if cpu_before is not None and cpu_after is not None:
        run.cpu_s = cpu_after.total_s - cpu_before.total_s
        run.main_thread_cpu_s = cpu_after.main_s - cpu_before.main_s


def add_live_options(ap: argparse.ArgumentParser) -> None:
    group = ap.add_argument_group("--live: live re-translation against llama-server")
    group.add_argument("--live", action="store_true",
                       help="closed-loop speakers re-translating lag-k streams: llama-server "
                            "AR against livetrans AR and SSBD on the same file")
    group.add_argument("--speakers", type=comma_list(positive_int, "a positive whole number"),
                       default="1", help="closed-loop speakers, comma-separated (1,8)")
    group.add_argument("--trimmed", default=None,
                       help="also run on this trimmed GGUF (auto: the copy serve --langs "
                            "en,LANG builds)")
    group.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                       help=f"of {','.join(METHODS)}; livetrans-ssbd@previous+ngram: SSBD "
                            "with those drafters only")
    group.add_argument("--repeats", type=positive_int, default=1,
                       help="passes of every method")
    group.add_argument("--ctx", type=int, default=2048, help="context per speaker slot")
    group.add_argument("--prompt-format", default="few-shot",
                       help="livetrans serve --prompt-format; llama-server gets the same "
                            "prompt's token ids (eval.bench.peer.prompt)")
    add_sample_options(group)
    add_open_loop_options(group)
    group.add_argument("--profile", type=Path, default=None,
                       help="record py-spy profiles of the livetrans server here")
    group.add_argument("--serve-args", default="",
                       help="more options for livetrans serve, e.g. '--crowded-proposals 0'")
    group.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                       help="one more livetrans server with these serve options on top of "
                            "--serve-args, its methods run in the same rotation and "
                            "reported as 'METHOD [NAME]' (repeatable), e.g. "
                            "--variant 'nocap=--crowded-proposals 0'")


# what the benchmark gives every livetrans server itself: a server told otherwise would
# listen where the benchmark does not look, or measure another file
BENCH_OWNED = ("--port", "--host", "--model")


def bench_owned(option: str) -> str | None:
    """The benchmark's own option that ``option`` names, if any: ``serve`` takes
    abbreviations (argparse), so ``--po=8000`` is ``--port`` too; ``--model-alias`` is not
    ``--model``."""
    flag = option.split("=", 1)[0]
    if not flag.startswith("--") or len(flag) < 4:
        return None
    return next((name for name in BENCH_OWNED if name.startswith(flag)), None)


def check_live_options(args: argparse.Namespace) -> None:
    """Refuse what cannot run, in one line; ``--speakers`` and ``--methods`` become lists."""
    if isinstance(args.speakers, str):
        args.speakers = [int(x) for x in args.speakers.split(",") if x.strip()]
    if isinstance(args.methods, str):
        args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in args.methods if m.split("@", 1)[0] not in METHODS
               or ("@" in m and not m.startswith("livetrans-ssbd@"))]
    if unknown:
        raise UsageError(f"--methods: unknown {','.join(unknown)}; of {','.join(METHODS)}")
    if not args.speakers or not args.methods:
        raise UsageError("--speakers and --methods need at least one value")
    if len(args.langs) != 1:
        raise UsageError("--live translates into one language: name one with --langs")
    args.variants = parse_variants(args.variant)
    try:
        common = shlex.split(args.serve_args)
    except ValueError as exc:
        raise UsageError(f"--serve-args: {exc}") from None
    for where, options in [("--serve-args", common),
                           *((f"--variant {name}", extra) for name, extra in args.variants)]:
        owned = [name for name in map(bench_owned, options) if name]
        if owned:
            raise UsageError(f"{where}: {owned[0]} is the benchmark's own "
                             "(every server gets a free loopback port and the file measured)")
    if args.samples < 1:
        raise UsageError("--samples: at least 1")
    check_open_loop_options(args)


VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,31}")


def parse_variants(given: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``NAME=ARGS`` pairs: a short unique name, and serve options split as a shell would."""
    variants: list[tuple[str, list[str]]] = []
    for item in given:
        name, sep, rest = item.partition("=")
        name = name.strip()
        if not sep or not VARIANT_NAME.fullmatch(name):
            raise UsageError(f"--variant {item!r}: write NAME=ARGS, NAME of letters, digits "
                             "and ._+- (at most 32)")
        if any(name == seen for seen, _ in variants):
            raise UsageError(f"--variant: the name {name!r} is given twice")
        try:
            extra = shlex.split(rest)
        except ValueError as exc:
            raise UsageError(f"--variant {name}: {exc}") from None
        if not extra:
            raise UsageError(f"--variant {name}: no serve options after '='")
        variants.append((name, extra))
    return variants


def write_live(report: dict, path: Path, about: Sequence[str] = ()) -> None:
    flat = {f"{model} {speakers}": methods for (model, speakers), methods in report.items()}
    path.write_text(json.dumps({"about": list(about), "runs": flat}, indent=1,
                               ensure_ascii=False) + "\n")


__all__ = ["ServerProcess", "add_live_options", "breakdown_table", "check_live_options",
           "prometheus_values", "run_live", "speed_table", "spread_table",
           "write_live"]
