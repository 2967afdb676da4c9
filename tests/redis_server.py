"""Debian's ``redis-server`` (installed by ``make system-deps``), started by the tests on a
loopback port with nothing persisted, so room-bus and transcript tests run against the real
thing. Skips (not fails) where the binary is missing, as the browser and nginx tests do."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
REDIS_SENTINEL = shutil.which("redis-sentinel") or (
    "/usr/bin/redis-sentinel" if Path("/usr/bin/redis-sentinel").exists() else None)


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


class _Process:
    """A Redis program on a loopback port: started, waited for, stopped."""

    port: int
    proc: subprocess.Popen | None

    def _launch(self, argv: list[str], timeout: float) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not _answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{Path(argv[0]).name} did not start on port {self.port}")
            time.sleep(0.05)

    def _client(self, decode: bool = True):  # noqa: ANN202 - redis.Redis
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30,
                           decode_responses=decode)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused one must hear the terminate
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


class RedisServer(_Process):
    """One ``redis-server`` process on 127.0.0.1; ``stop``/``start`` simulate an outage
    (same port; without ``persist`` a restarted Redis is empty)."""

    def __init__(self, workdir: Path, port: int | None = None, persist: bool = False,
                 replica_of: int | None = None) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server missing (make system-deps installs it)")
        self.workdir = workdir
        self.port = port or _free_port()
        self.persist = persist  # an append-only file, as docker/compose.yaml runs it
        self.replica_of = replica_of  # a primary's port: this one is its replica
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._launch(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "yes" if self.persist else "no",
             "--appendfsync", "always", "--dir", str(self.workdir),
             "--protected-mode", "yes", "--loglevel", "warning",
             *(["--replicaof", "127.0.0.1", str(self.replica_of)] if self.replica_of else [])],
            timeout)

    def cli(self, *args: object) -> object:
        """One command on its own connection (what an operator types in redis-cli)."""
        client = self._client()
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def pause(self) -> None:
        """SIGSTOP: Redis stops answering (a stall longer than the clients' timeout)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

@contextmanager
def redis_server(workdir: Path, persist: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(workdir, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class RedisSentinel(_Process):
    """Debian's ``redis-sentinel`` watching one primary as ``SERVICE`` (quorum 1), on a
    loopback port: the failover tests' Sentinel. ``failover()`` is what an operator (or a
    dead primary) triggers."""

    SERVICE = "livetrans"

    def __init__(self, workdir: Path, primary_port: int) -> None:
        if REDIS_SENTINEL is None:
            pytest.skip("redis-sentinel missing (make system-deps installs it)")
        self.workdir = workdir
        self.port = _free_port()
        self.primary_port = primary_port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis-sentinel://127.0.0.1:{self.port}/{self.SERVICE}/0"

    def start(self, timeout: float = 10.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.workdir}\n"
            f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary_port} 1\n"
            f"sentinel down-after-milliseconds {self.SERVICE} 2000\n"
            f"sentinel failover-timeout {self.SERVICE} 10000\n"
            f"sentinel parallel-syncs {self.SERVICE} 1\n", encoding="utf-8")
        self._launch([REDIS_SENTINEL, str(conf), "--loglevel", "warning"], timeout)

    def primary(self) -> int:
        client = self._client()
        try:
            return int(client.execute_command(
                "SENTINEL", "get-master-addr-by-name", self.SERVICE)[1])
        finally:
            client.close()

    def wait_for_replicas(self, n: int, timeout: float = 30.0) -> None:
        """Until Sentinel knows ``n`` replicas of the primary (it can fail over then)."""
        client = self._client()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                replicas = client.execute_command("SENTINEL", "replicas", self.SERVICE)
                if len(replicas) >= n:
                    return
                time.sleep(0.2)
        finally:
            client.close()
        raise RuntimeError("Sentinel did not see the replicas")

    def failover(self) -> None:
        client = self._client()
        try:
            client.execute_command("SENTINEL", "failover", self.SERVICE)
        finally:
            client.close()
