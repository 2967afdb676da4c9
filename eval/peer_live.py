"""Live re-translation against llama.cpp's own server: ``llama-server-bench --live``.

    livetrans llama-server-bench --live --llama-server PATH/llama-server \\
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

Both servers get the same rendered prompt (livetrans with ``context: 0``: no earlier
finals) and the same token cap. ``C`` closed-loop speakers share the streams (a speaker
sends its next update when the answer to the last arrived). Both servers stay up; the
methods run one after another (the order rotated on each repeat) on one GGUF file, then
on the trimmed file when ``--trimmed`` names one (``auto``: the copy ``serve --langs en,X``
builds). The client runs in its own process, so neither server shares its interpreter.
``--variant NAME=ARGS`` starts one more livetrans server with other serve options beside
them, and its methods join the same rotation ("livetrans-ssbd [NAME]"): a setting is
compared with the defaults in one run, not in two runs on a machine that drifts.

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
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from app.model_files import resolve_model_path
from app.translation.prompts import FewShotFormat
from app.usage import UsageError, comma_list, positive_int
from eval.datasets.flores import read_flores_pair
from eval.datasets.streams import Stream, lag_k_stream
from eval.local_server import free_port
from eval.peer_figures import (
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
from eval.process_cpu import cpu_times

# -- the servers --------------------------------------------------------------------------

def _wait_healthy(url: str, proc: subprocess.Popen, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UsageError(f"{what} exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise UsageError(f"{what} did not become ready in {timeout:.0f} s")


class ServerProcess:
    """A server process on a loopback port, stopped on ``close``."""

    def __init__(self, cmd: list[str], port: int, what: str) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.what = what
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready(self, timeout: float = 300) -> ServerProcess:
        _wait_healthy(self.url, self.proc, self.what, timeout)
        return self

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def llama_server(binary: Path, model: Path, speakers: int, threads: int | None,
                 ctx_per_slot: int) -> ServerProcess:
    port = free_port()
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
           "-c", str(ctx_per_slot * speakers), "-np", str(speakers), "--no-webui", "--metrics"]
    if threads:
        cmd += ["-t", str(threads), "-tb", str(threads)]
    return ServerProcess(cmd, port, "llama-server")


def livetrans_server(model: Path, speakers: int, threads: int | None,
                     ctx_per_slot: int, extra: Sequence[str] = ()) -> ServerProcess:
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model",
           str(model), "--parallel", str(speakers), "--n-ctx", str(ctx_per_slot),
           "--log-level", "warning", "--max-live-sessions", str(max(8, 2 * speakers)),
           *extra]
    if threads:
        cmd += ["--n-threads", str(threads)]
    return ServerProcess(cmd, port, "livetrans serve")


# -- forward passes, from each server's own counters ----------------------------------------

# llama-server: its llama_decode calls and the tokens they carried (prompt and generated);
# livetrans: the step scheduler's passes and their rows (one histogram's count and sum)
LLAMA_COUNTERS = ("llamacpp:n_decode_total",
                  ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"))
LIVETRANS_COUNTERS = ("livetrans_step_batch_rows_count", ("livetrans_step_batch_rows_sum",))


def prometheus_values(text: str) -> dict[str, float]:
    """Every sample of a Prometheus exposition by its name (``_count``, ``_sum`` and
    ``_total`` kept), summed over its labels; what cannot be parsed counts as nothing."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    except ValueError:
        return {}
    return values


def pass_counters(url: str, llama: bool) -> tuple[float, float] | None:
    """(forward passes, rows they carried) so far, or ``None`` where the server has no such
    counters (a llama-server without ``--metrics``)."""
    passes_name, rows_names = LLAMA_COUNTERS if llama else LIVETRANS_COUNTERS
    try:
        resp = httpx.get(f"{url}/metrics", timeout=30)
        resp.raise_for_status()
    except httpx.HTTPError:
        return None
    values = prometheus_values(resp.text)
    if passes_name not in values:
        return None
    return values[passes_name], sum(values.get(n, 0.0) for n in rows_names)


# -- one update, per method ---------------------------------------------------------------

class Speaker:
    """The requests of one method; ``update`` returns what the speaker saw."""

    def __init__(self, method: str, url: str, lang: str, caps: dict[str, int],
                 model_id: str, run_tag: str = "") -> None:
        self.method, self.url, self.lang, self.caps = method, url, lang, caps
        self.model_id = model_id
        # a repeat's sessions are new ones: the same session sent its stream again would
        # be a late update (409) to the server
        self.run_tag = run_tag
        self.fmt = FewShotFormat()

    async def update(self, client: httpx.AsyncClient, stream: int, source: str,
                     final: bool) -> UpdateRecord:
        t0 = time.perf_counter()
        if self.method == BASELINE:
            resp = await client.post(f"{self.url}/completion", json={
                "prompt": self.fmt.translation(source, "en", self.lang).text,
                "n_predict": self.caps[source], "temperature": 0.0, "top_k": 1,
                "stop": ["\n"], "cache_prompt": True})
            wall = (time.perf_counter() - t0) * 1000
            resp.raise_for_status()
            data = resp.json()
            t = data.get("timings", {})
            return UpdateRecord(stream, final, data["content"].strip(), wall,
                                int(t.get("predicted_n", 0)),
                                {f"llama_{k}": float(t.get(k, 0.0)) for k in LLAMA_TIMINGS})
        body: dict = {"model": self.model_id,
                      "messages": [{"role": "user", "content": source}],
                      "target_lang": self.lang, "source_lang": "en",
                      "session_id": re.sub(r"[^A-Za-z0-9-]", "-",
                                           f"{self.method}-{self.run_tag}-{stream}"),
                      "is_final": final,
                      "context": 0, "max_tokens": self.caps[source]}
        if self.method == "livetrans-ar":
            body["drafters"] = []
        elif "@" in self.method:  # livetrans-ssbd@previous+ngram: those drafters only
            body["drafters"] = [d for d in self.method.split("@", 1)[1].split("+") if d]
        resp = await client.post(f"{self.url}/v1/chat/completions", json=body)
        wall = (time.perf_counter() - t0) * 1000
        resp.raise_for_status()
        data = resp.json()
        info = data.get("livetrans") or {}
        counts = {k: float(info.get(k) or 0) for k in DRAFT_COUNTS}
        return UpdateRecord(stream, final, data["choices"][0]["message"]["content"].strip(),
                            wall, int(data["usage"]["completion_tokens"]),
                            {**(info.get("timings") or {}), **counts})


    @asynccontextmanager
    async def session(self, client: httpx.AsyncClient) -> AsyncIterator[object]:
        """What one speaker keeps for all its streams (here: the shared HTTP client)."""
        yield client

    async def stream(self, handle: object, i: int, stream: Stream, run: MethodRun) -> None:
        """One stream's updates, each sent when the answer to the last has arrived."""
        client = handle
        for u in stream.updates:
            try:
                run.records.append(await self.update(client, i, u.source, u.is_final))
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                detail = exc.response.text[:200] \
                    if isinstance(exc, httpx.HTTPStatusError) else ""
                run.failed(f"{type(exc).__name__}: {exc} {detail}".strip())


class LiveSpeaker(Speaker):
    """``livetrans-ws-*``: a speaker's one WebSocket ``/v1/live`` connection for all its
    streams, as a captioning client keeps one for a talk: a stream is a segment, its
    updates ``partial`` / ``final`` frames, each sent when the last one's caption arrived
    (so none is coalesced); the caption's ``stats`` carry the timings."""

    @asynccontextmanager
    async def session(self, client: httpx.AsyncClient) -> AsyncIterator[object]:
        import websockets

        start: dict = {"type": "start", "target_lang": self.lang, "source_lang": "en",
                       "context": 0}
        if self.method == "livetrans-ws-ar":
            start["drafters"] = []
        url = self.url.replace("http://", "ws://") + "/v1/live"
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps(start))
            await self._frame(ws, "ready")
            yield ws
            await ws.send(json.dumps({"type": "stop"}))
            await self._frame(ws, "done")

    async def stream(self, handle: object, i: int, stream: Stream, run: MethodRun) -> None:
        import websockets

        ws = handle
        try:
            for u in stream.updates:
                t0 = time.perf_counter()
                await ws.send(json.dumps({"type": "final" if u.is_final else "partial",
                                          "segment": i, "text": u.source}))
                caption = await self._frame(ws, "caption")
                wall = (time.perf_counter() - t0) * 1000
                stats = caption.get("stats") or {}
                counts = {k: float(stats.get(k) or 0) for k in DRAFT_COUNTS}
                tokens = int(stats.get("accepted_tokens") or 0) + \
                    int(stats.get("new_tokens") or 0)
                run.records.append(UpdateRecord(i, u.is_final, caption["text"].strip(), wall,
                                                tokens, {**(stats.get("timings") or {}),
                                                         **counts}))
        except (OSError, websockets.WebSocketException, KeyError, ValueError,
                RuntimeError) as exc:
            run.failed(f"{type(exc).__name__}: {exc}")

    @staticmethod
    async def _frame(ws, kind: str) -> dict:  # noqa: ANN001 - a websockets connection
        """The next frame of ``kind``; an ``error`` frame raises with its message."""
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 600))
            if msg.get("type") == kind:
                return msg
            if msg.get("type") == "error":
                raise RuntimeError(f"{msg.get('code')}: {msg.get('message')}")


def speaker_for(method: str, url: str, lang: str, caps: dict[str, int],
                model_id: str, run_tag: str = "") -> Speaker:
    cls = LiveSpeaker if method.startswith("livetrans-ws-") else Speaker
    return cls(method, url, lang, caps, model_id, run_tag)


async def run_method(speaker: Speaker, streams: Sequence[Stream], speakers: int,
                     run: MethodRun) -> MethodRun:
    """Every stream, ``speakers`` at a time, each speaker in a closed loop."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(streams)):
        queue.put_nowait(i)

    async def one(client: httpx.AsyncClient) -> None:
        try:
            async with speaker.session(client) as handle:
                while not queue.empty():
                    i = queue.get_nowait()
                    await speaker.stream(handle, i, streams[i], run)
        except Exception as exc:  # noqa: BLE001 - a speaker that cannot connect: counted, said
            run.failed(f"{type(exc).__name__}: {exc}")

    limits = httpx.Limits(max_connections=speakers + 2)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(one(client) for _ in range(speakers)))
        run.wall_s = time.perf_counter() - t0
    return run


# -- the run ------------------------------------------------------------------------------

def token_caps(url: str, updates: Sequence[str]) -> dict[str, int]:
    """livetrans's cap for each source (``translation_token_cap``: 3 tokens a source token
    + 16, at most 256), counted with llama-server's tokenizer of the same file."""
    caps = {}
    with httpx.Client(timeout=60) as client:
        for source in updates:
            if source not in caps:
                n = len(client.post(f"{url}/tokenize", json={"content": source})
                        .json()["tokens"])
                caps[source] = min(256, 3 * n + 16)
    return caps


def resolve_trimmed(value: str | None, model: Path, lang: str) -> Path | None:
    if value is None:
        return None
    if value == "auto":
        from app.vocab_trim.auto import AutoTrim, served_model

        served = served_model(model, AutoTrim(("en", lang)))
        if not served.trimmed:
            raise UsageError(f"{model.name} could not be trimmed for en,{lang} (see the log)")
        return served.path
    path = Path(value)
    if not path.is_file():
        raise UsageError(f"--trimmed: no such file {path}")
    return path


class Profiler:
    """py-spy recording one livetrans server process while a run lasts (``--profile``)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if folder is not None and not Path(self.binary).exists():
            raise UsageError("--profile needs py-spy (pip install py-spy)")

    def start(self, pid: int, name: str) -> subprocess.Popen | None:
        if self.folder is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(
            [self.binary, "record", "--pid", str(pid), "--rate", "200", "--threads",
             "--native", "--format", "speedscope", "-o", str(self.folder / f"{name}.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @staticmethod
    def stop(proc: subprocess.Popen | None) -> None:
        if proc is None:
            return
        import signal

        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_live(args: argparse.Namespace) -> dict:
    model = resolve_model_path(args.model_a)
    lang = args.langs[0]
    pairs = read_flores_pair(args.flores_dir, args.split, "en", lang)
    pairs = pairs[args.offset: args.offset + args.limit]
    streams = [Stream(str(i), lag_k_stream(src, args.lag), reference=ref)
               for i, (src, ref) in enumerate(pairs)]
    files = [model]
    trimmed = resolve_trimmed(args.trimmed, model, lang)
    if trimmed is not None:
        files.append(trimmed)
    profiler = Profiler(args.profile)
    report: dict = {}
    for file in files:
        for speakers in args.speakers:
            report[(file.name, speakers)] = run_file(args, file, speakers, streams, lang,
                                                     profiler)
    return report


def run_file(args: argparse.Namespace, file: Path, speakers: int, streams: Sequence[Stream],
             lang: str, profiler: Profiler) -> dict:
    """Every method on one file at one speaker count: llama-server and one livetrans server
    (and one more per ``--variant``) up together, the runs one after another, their order
    rotated on each repeat."""
    llama = llama_server(args.llama_server, file, speakers, args.threads, args.ctx)
    common = shlex.split(args.serve_args)
    lives = {"": livetrans_server(file, speakers, args.threads, args.ctx, common)}
    for name, extra in args.variants:
        lives[name] = livetrans_server(file, speakers, args.threads, args.ctx,
                                       [*common, *extra])
    try:
        llama.ready()
        for live in lives.values():
            live.ready()
        caps = token_caps(llama.url, [u.source for s in streams for u in s.updates])
        model_id = httpx.get(f"{lives[''].url}/v1/models").json()["data"][0]["id"]
        # (label, method, server): a variant's runs are labelled "METHOD [NAME]"
        order = [(m, m, llama if m == BASELINE else lives[""]) for m in args.methods]
        order += [(f"{m} [{name}]", m, live) for name, live in lives.items() if name
                  for m in args.methods if m != BASELINE]
        runs: list[MethodRun] = []
        for repeat in range(args.repeats):
            turn = repeat % len(order)
            for label, method, server in order[turn:] + order[:turn]:
                speaker = speaker_for(method, server.url, lang, caps, model_id,
                                      run_tag=f"r{repeat}")
                run = MethodRun(label, file.name, speakers)
                is_llama = server is llama
                recorder = None if is_llama else profiler.start(
                    server.proc.pid, re.sub(r"[^A-Za-z0-9.-]+", "-",
                                            f"{file.stem}-{speakers}sp-{label}-{repeat}"))
                before = pass_counters(server.url, is_llama)
                cpu_before = cpu_times(server.proc.pid)
                try:
                    asyncio.run(run_method(speaker, streams, speakers, run))
                finally:
                    profiler.stop(recorder)
                after = pass_counters(server.url, is_llama)
                cpu_after = cpu_times(server.proc.pid)
                if before is not None and after is not None:
                    run.passes, run.pass_rows = after[0] - before[0], after[1] - before[1]
                if cpu_before is not None and cpu_after is not None:
                    run.cpu_s = cpu_after.total_s - cpu_before.total_s
                    run.main_thread_cpu_s = cpu_after.main_s - cpu_before.main_s
                runs.append(run)
                print(f"{file.name} {speakers} speakers {label}: {run.wall_s:.1f} s, "
                      f"{len(run.records)} updates, {run.errors} errors"
                      + (f" (first: {run.first_error})" if run.errors else ""),
                      file=sys.stderr, flush=True)
        return summarize(runs, streams, lang)
    finally:
        llama.close()
        for live in lives.values():
            live.close()


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


def write_live(report: dict, path: Path) -> None:
    flat = {f"{model} {speakers}": methods for (model, speakers), methods in report.items()}
    path.write_text(json.dumps(flat, indent=1, ensure_ascii=False) + "\n")


__all__ = ["ServerProcess", "add_live_options", "breakdown_table", "check_live_options",
           "llama_server", "run_live", "speed_table", "write_live"]
