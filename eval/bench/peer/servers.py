"""The processes of ``llama-server-bench --live`` (``eval.bench.peer.live``): llama-server and
``livetrans serve`` on loopback ports, their forward-pass counters (``/metrics``), the
trimmed file, py-spy profiles, and the machine the figures were measured on.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.usage import UsageError
from eval.local_server import free_port

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
                     ctx_per_slot: int, extra: Sequence[str] = (),
                     prompt_format: str | None = None) -> ServerProcess:
    """``livetrans serve`` on ``model``; ``prompt_format`` pins ``--prompt-format`` (the
    benchmark renders the same prompt for llama-server, ``eval.bench.peer.prompt``)."""
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model",
           str(model), "--parallel", str(speakers), "--n-ctx", str(ctx_per_slot),
           "--log-level", "warning", "--max-live-sessions", str(max(8, 2 * speakers)),
           *(["--prompt-format", prompt_format] if prompt_format else []), *extra]
    if threads:
        cmd += ["--n-threads", str(threads)]
    return ServerProcess(cmd, port, "livetrans serve")


@dataclass
class ServerSet:
    """The servers of one file, up together: llama-server, the livetrans server of
    ``--serve-args`` (named "") and one more per ``--variant``."""

    llama: ServerProcess
    lives: dict[str, ServerProcess]
    model_id: str  # what the livetrans servers call the model

    def order(self, methods: Sequence[str], baseline: str
              ) -> list[tuple[str, str, ServerProcess]]:
        """(label, method, server) of every run: ``baseline`` on llama-server, the other
        methods on the livetrans server, then on each variant's, labelled "METHOD [NAME]"."""
        order = [(m, m, self.llama if m == baseline else self.lives[""]) for m in methods]
        order += [(f"{m} [{name}]", m, live) for name, live in self.lives.items() if name
                  for m in methods if m != baseline]
        return order


@contextmanager
def servers_for(args: argparse.Namespace, model: Path, slots: int) -> Iterator[ServerSet]:
    """llama-server and the livetrans servers on ``model`` with ``slots`` sequences each,
    started together, ready when yielded, stopped afterwards (the options of
    ``add_live_options``: ``llama_server``, ``threads``, ``ctx``, ``serve_args``,
    ``variants``, ``prompt_format``)."""
    llama = llama_server(args.llama_server, model, slots, args.threads, args.ctx)
    common = shlex.split(args.serve_args)
    lives = {"": livetrans_server(model, slots, args.threads, args.ctx, common,
                                  args.prompt_format)}
    for name, extra in args.variants:
        lives[name] = livetrans_server(model, slots, args.threads, args.ctx,
                                       [*common, *extra], args.prompt_format)
    try:
        llama.ready()
        for live in lives.values():
            live.ready()
        model_id = httpx.get(f"{lives[''].url}/v1/models").json()["data"][0]["id"]
        yield ServerSet(llama, lives, model_id)
    finally:
        llama.close()
        for live in lives.values():
            live.close()


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


def machine() -> dict:
    """Where the figures were measured (CPU model, cores, load): they mean little without
    it, and a run on a busy machine is no measurement."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.platform(),
            "load_1m": load}


def describe_machine(m: dict) -> str:
    return f"machine: {m['cpu']}, {m['cores']} cores, {m['system']}, load {m['load_1m']} at start"
