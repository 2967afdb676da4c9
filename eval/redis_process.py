"""A ``redis-server`` (or ``redis-sentinel``) process on loopback that a benchmark or a test
starts, faults (pause, restart) and stops: the real Debian binary, never a fake."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from eval.local_server import free_port


def answers(port: int) -> bool:
    """Whether a Redis program on 127.0.0.1:``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisProgram:
    """A Redis program on a loopback port: started, waited for, paused, stopped."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    def _launch(self, argv: list[str], timeout: float) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not answers(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{Path(argv[0]).name} did not start on port {self.port}")
            time.sleep(0.05)

    def cli(self, *args: object) -> Any:
        """One command on its own connection (what an operator types in redis-cli)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30,
                             decode_responses=True)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def pause(self) -> None:
        """SIGSTOP: it stops answering (a stall longer than the clients' timeout)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the machine it ran on died (nothing flushed, no goodbye to replicas)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        """Shut down (flushing an append-only file); a paused one is woken first."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


class RedisProcess(RedisProgram):
    """``redis-server`` on 127.0.0.1 with its data in ``workdir``: ``persist`` keeps an
    append-only file (as docker/compose.yaml runs it: a restart keeps the data; without it
    a restarted Redis is empty), ``replica_of`` makes it a replica of that port."""

    def __init__(self, binary: str, workdir: str | Path, *, port: int | None = None,
                 persist: bool = True, fsync: str = "always",
                 replica_of: int | None = None) -> None:
        super().__init__(port)
        self.binary, self.workdir = binary, Path(workdir)
        self.persist, self.fsync, self.replica_of = persist, fsync, replica_of

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._launch(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes" if self.persist else "no", "--appendfsync", self.fsync,
             "--dir", str(self.workdir), "--maxmemory-policy", "noeviction",
             "--protected-mode", "yes", "--loglevel", "warning",
             *(["--replicaof", "127.0.0.1", str(self.replica_of)] if self.replica_of else [])],
            timeout)
