"""``livetrans bench bus``'s Redis: a throwaway redis-server, and the faults injected into it
(kill, oom, pause, restart, foreign) and healed."""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack, closing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from eval.bench.bus.results import Window
from eval.redis_process import RedisProcess

FAULTS = ("none", "kill", "oom", "pause", "restart", "foreign")
OWN_REDIS = ("pause", "restart")  # need the redis-server process this bench started
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
PREFIX = "livetrans"  # the room bus's key prefix (app.rooms.bus.redis_bus)
REPEAT_S = 1.0  # kill and foreign act again this often while their fault lasts


# -- Redis ---------------------------------------------------------------------------------
def start_redis(stack: ExitStack) -> RedisProcess:
    """A throwaway ``redis-server`` on loopback, stopped when ``stack`` closes."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("bench-bus: no --room-bus given and no redis-server installed "
                         "(make system-deps installs it)")
    workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="livetrans-redis-"))
    process = RedisProcess(binary, workdir, fsync="everysec")
    stack.callback(process.stop)
    try:
        process.start()
    except RuntimeError as exc:
        raise SystemExit(f"bench-bus: {exc}") from None
    return process


def junk_entries() -> list[dict[str, Any]]:
    """Stream entries another client might write to a room's keys: wrong shapes, not
    forgeries (a well-formed caption of the running talk cannot be told from a real one)."""
    other = "f0reign0" * 2  # a talk id that is not the running talk's
    caption = json.dumps({"type": "caption", "segment": 0, "revision": 0, "final": True,
                          "lang": "de", "text": "junk"})
    return [
        {"k": "caption"},
        {"k": "caption", "talk": other, "lang": "de", "segment": "0", "frame": caption},
        {"k": "caption", "talk": "", "lang": "de", "segment": "x", "frame": "{"},
        {"k": "caption", "talk": other, "lang": "de", "segment": "1", "frame": "[1, 2]"},
        {"k": "start", "talk": other, "info": "not json"},
        {"k": "start", "talk": other, "info": json.dumps([1, 2])},
        {"k": "end", "talk": other},
        {"k": "nonsense", "talk": other},
        {"frame": "null"},
        {"data": json.dumps({"type": "caption"}), "bytes": b"\xff\xfe\x00junk"},
    ]


JUNK_MESSAGES = ("junk", "", "null", "[1, 2, 3]", '{"type": "caption"}',
                 '{"k": "caption", "frame": 7}', '{"type": "ended"}', "\u00ff" * 64)


class FaultInjector:
    """Makes one fault happen to Redis and heals it. Each step blocks (a command, a signal,
    a restart), so the bench runs them on a thread while the clients' loop goes on; the
    lock keeps a heal from racing an injection that is still running."""

    def __init__(self, kind: str, url: str, process: RedisProcess | None) -> None:
        if kind in OWN_REDIS and process is None:
            raise ValueError(f"fault '{kind}' needs the bench's own redis-server")
        self.kind, self.url, self.process = kind, url, process
        self.room = ""
        self._lock = threading.Lock()
        self._active = False
        self._maxmemory = "0"

    @property
    def repeats(self) -> bool:
        return self.kind in ("kill", "foreign")

    def _client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=5, socket_connect_timeout=2,
                                    decode_responses=True)

    def inject(self) -> None:
        with self._lock:
            if self.kind == "oom":
                with closing(self._client()) as c:
                    # the setting to heal to, read first: a Redis given by --room-bus gets
                    # its own back, not ours
                    self._maxmemory = str(c.config_get("maxmemory").get("maxmemory", "0"))
                    self._active = True
                    c.config_set("maxmemory", 1)
                return
            self._active = True
            if self.kind == "pause":
                self.process.pause()
            elif self.kind == "restart":
                self.process.stop()
            else:
                self._act()

    def again(self) -> None:
        with self._lock:
            if self._active:
                self._act()

    def _act(self) -> None:
        if self.kind == "kill":
            with closing(self._client()) as c:
                c.execute_command("CLIENT", "KILL", "TYPE", "normal")
                c.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        elif self.kind == "foreign":
            self._foreign()

    def _foreign(self) -> None:
        keys = [f"{PREFIX}:{what}:{self.room}" for what in ("finals", "partials", "room")]
        with closing(self._client()) as c:
            pipe = c.pipeline(transaction=False)
            for key in keys:
                for fields in junk_entries():
                    pipe.xadd(key, fields, maxlen=1000, approximate=True)
                for message in JUNK_MESSAGES:
                    pipe.publish(key, message)
            pipe.expire(keys[2], 3600)  # the bus never reads it: it must not stay forever
            pipe.execute()

    def heal(self) -> None:
        with self._lock:
            if not self._active:
                return
            self._active = False
            if self.kind == "oom":
                with closing(self._client()) as c:
                    c.config_set("maxmemory", self._maxmemory)
            elif self.kind == "pause":
                self.process.resume()
            elif self.kind == "restart":
                self.process.start()


async def fault_window(injector: FaultInjector, fault_s: float) -> Window:
    """Inject, keep it up (kill and foreign again every ``REPEAT_S``) for ``fault_s``, heal.
    Healed however this ends, so no fault outlives its talk."""
    start = time.perf_counter()
    try:
        await asyncio.to_thread(injector.inject)
        end_at = start + fault_s
        while (left := end_at - time.perf_counter()) > 0:
            await asyncio.sleep(min(REPEAT_S, left))
            if injector.repeats and end_at - time.perf_counter() > 0.1:
                await asyncio.to_thread(injector.again)
        await asyncio.to_thread(injector.heal)
    finally:
        injector.heal()  # a no-op once healed; after a failure or a cancel, the cleanup
    return start, time.perf_counter()


@dataclass
class Plan:
    """A fault for one talk: injected after ``at`` of its updates, healed ``fault_s`` on."""

    injector: FaultInjector
    at: float
    fault_s: float

    def first_update(self, n: int) -> int:
        return min(max(round(self.at * n), 0), max(n - 1, 0))


def parse_faults(text: str) -> list[str]:
    """``--faults`` as a list; an unknown name is refused with the known ones."""
    faults = [f.strip() for f in text.split(",") if f.strip()]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        raise argparse.ArgumentTypeError(
            f"unknown fault '{(unknown or [''])[0]}': choose from {', '.join(FAULTS)}")
    return faults


def check_fault_target(faults: list[str], room_bus: str | None) -> str | None:
    """Why these faults cannot be injected into ``room_bus`` (None: they can). Faults act
    on a Redis on this machine only, and pause and restart need the bench's own process."""
    if room_bus is None or set(faults) == {"none"}:
        return None
    own = [f for f in faults if f in OWN_REDIS]
    if own:
        return (f"--faults {','.join(own)}: needs the redis-server this bench starts; "
                "leave out --room-bus")
    parts = urlsplit(room_bus)
    if parts.scheme != "redis" or parts.hostname not in LOOPBACK:
        return "--faults: injected only into a Redis on loopback (redis://127.0.0.1:PORT/DB)"
    return None
