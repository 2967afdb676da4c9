"""Debian's ``redis-server`` and ``redis-sentinel`` (installed by ``make system-deps``),
started by the tests on loopback ports, so room-bus and transcript tests run against the
real thing (``eval.redis_process``). Skips (not fails) where a binary is missing, as the
browser and nginx tests do."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from eval.redis_process import RedisProcess, RedisProgram

REDIS_SERVER = shutil.which("redis-server") or (
    "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
REDIS_SENTINEL = shutil.which("redis-sentinel") or (
    "/usr/bin/redis-sentinel" if Path("/usr/bin/redis-sentinel").exists() else None)


class RedisServer(RedisProcess):
    """Debian's ``redis-server`` on 127.0.0.1 for a test; ``stop``/``start`` simulate an
    outage (same port; without ``persist`` a restarted Redis is empty)."""

    def __init__(self, workdir: Path, port: int | None = None, persist: bool = False,
                 replica_of: int | None = None) -> None:
        if REDIS_SERVER is None:
            pytest.skip("redis-server missing (make system-deps installs it)")
        super().__init__(REDIS_SERVER, workdir, port=port, persist=persist,
                         replica_of=replica_of)


@contextmanager
def redis_server(workdir: Path, persist: bool = False) -> Iterator[RedisServer]:
    server = RedisServer(workdir, persist=persist)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def replicas_on_redis(workdir: Path, **settings: object) -> Iterator[tuple[object, object]]:
    """Replicas a and b of a real server (the real model) on one Redis room bus, with
    ``settings`` besides the bus."""
    from eval.local_server import LocalServer

    with redis_server(workdir) as redis:
        common = {"room_bus": redis.url, **settings}
        with LocalServer(replica_id="a", **common) as a, \
                LocalServer(replica_id="b", **common) as b:
            yield a, b


class RedisSentinel(RedisProgram):
    """Debian's ``redis-sentinel`` watching one primary as ``SERVICE`` (quorum 1), on a
    loopback port: the failover tests' Sentinel. ``failover()`` is what an operator (or a
    dead primary) triggers."""

    SERVICE = "livetrans"

    def __init__(self, workdir: Path, primary_port: int) -> None:
        if REDIS_SENTINEL is None:
            pytest.skip("redis-sentinel missing (make system-deps installs it)")
        super().__init__()
        self.workdir = workdir
        self.primary_port = primary_port
        self.replica_port: int | None = None
        self.servers: dict[int, RedisServer] = {}  # port -> server, to kill one

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
        return int(self.cli("SENTINEL", "get-master-addr-by-name", self.SERVICE)[1])

    def wait_for_replicas(self, n: int, timeout: float = 30.0) -> None:
        """Until Sentinel knows ``n`` replicas of the primary (it can fail over then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.cli("SENTINEL", "replicas", self.SERVICE)) >= n:
                return
            time.sleep(0.2)
        raise RuntimeError("Sentinel did not see the replicas")

    def failover(self) -> None:
        self.cli("SENTINEL", "failover", self.SERVICE)


def wait_synced(primary: RedisServer, replica: RedisServer, timeout: float = 30.0) -> None:
    """Until the replica is synced on both sides: its link to the primary is up, and the
    primary counts it online (``ROLE`` lists it only once its first ``REPLCONF ACK``
    came, up to a second after the replica's link is up: a write before that finds the
    primary alone)."""
    deadline = time.monotonic() + timeout
    while True:
        link = replica.cli("INFO", "replication").get("master_link_status")
        first = primary.cli("INFO", "replication").get("slave0") or {}
        online = (first.get("state") == "online" if isinstance(first, dict)
                  else "state=online" in str(first))
        if link == "up" and online:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the replica did not sync")
        time.sleep(0.1)


@contextmanager
def sentinel_watching_a_pair(workdir: Path) -> Iterator[RedisSentinel]:
    """Debian's redis-sentinel watching a primary and its synced replica, ready to fail
    over: ``servers`` maps each port to its server (to kill one), ``replica_port`` names
    the replica."""
    primary = RedisServer(workdir / "primary")
    primary.start()
    replica = RedisServer(workdir / "replica", replica_of=primary.port)
    watcher = None
    try:
        replica.start()
        watcher = RedisSentinel(workdir / "sentinel", primary.port)
        watcher.start()
        watcher.wait_for_replicas(1)
        wait_synced(primary, replica)  # the replica has the primary's data
        watcher.replica_port = replica.port
        watcher.servers = {primary.port: primary, replica.port: replica}
        yield watcher
    finally:
        if watcher is not None:
            watcher.stop()
        replica.stop()
        primary.stop()
