"""Debian's ``redis-server`` (installed by ``make system-deps``), started by the tests on a
loopback port with nothing persisted, so room-bus and transcript tests run against the real
thing. Skips (not fails) where the binary is missing, as the browser and nginx tests do."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1; ``stop``/``start`` simulate an outage
    (same port; without ``persist`` a restarted Redis is empty)."""

    def __init__(self, workdir: Path, port: int | None = None, persist: bool = False) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server missing (make system-deps installs it)")
        self.workdir = workdir
        self.port = port or _free_port()
        self.persist = persist  # an append-only file, as docker/compose.yaml runs it
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes" if self.persist else "no",
             "--appendfsync", "always", "--dir", str(self.workdir),
             "--protected-mode", "yes", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not _answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


@contextmanager
def redis_server(workdir: Path, persist: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(workdir, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()
