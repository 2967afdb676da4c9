"""Host name lookups for pushes (``app.live.outputs.resolve``): on threads of their own.

The resolver function is injected: one that hangs until the test releases it, one that
answers a fixed address. A hanging lookup must fail its push attempt (retried as a
network error) and leave asyncio's default executor, which the rest of the server uses,
free. Waits are bounds against hanging, never timings.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputSpec
from app.live.outputs.delivery import DeliveryTimes, Pushes
from app.live.outputs.resolve import ResolveError, Resolver
from app.rooms.bus import TalkInfo
from app.rooms.transcripts.store import TranscriptLine
from tests.app.live.outputs.receiver import Receiver

HOST = "hooks.example"  # named exactly by the policy: it may resolve to loopback
INFO = TalkInfo(room="keynote-1", talk_id="t-1", replica="r", langs=("de",), started_at=0.0)
TIMES = DeliveryTimes(request_s=5.0, retry_s=60.0, flush_s=5.0, backoff_first_s=0.02,
                      backoff_max_s=0.05)


def loopback_answer(host: str, port: int) -> list[tuple[Any, ...]]:
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


class HangingResolver:
    """getaddrinfo that hangs (its first ``hang`` calls) until ``release``, then answers
    loopback; counts its calls."""

    def __init__(self, hang: int = 1) -> None:
        self.hang = hang
        self.calls = 0
        self.entered = threading.Event()  # a call is hanging now
        self.release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[tuple[Any, ...]]:
        with self.lock:
            self.calls += 1
            hangs = self.calls <= self.hang
        if hangs:
            self.entered.set()
            self.release.wait(60)
        return loopback_answer(host, port)


async def _until(check: Callable[[], bool], limit: float = 30) -> None:
    async with asyncio.timeout(limit):
        while not check():
            await asyncio.sleep(0.02)


def test_an_answer_is_the_addresses_in_order_without_repeats() -> None:
    def answer(host: str, port: int) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in ("10.0.0.2", "10.0.0.1", "10.0.0.2")]

    resolver = Resolver(answer)
    assert asyncio.run(resolver.resolve(HOST, 80)) == ["10.0.0.2", "10.0.0.1"]
    assert resolver.busy == 0


def test_a_resolver_error_is_a_resolve_error() -> None:
    def fails(host: str, port: int) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(ResolveError, match="gaierror"):
        asyncio.run(Resolver(fails).resolve(HOST, 80))


def test_a_hanging_lookup_times_out_and_leaves_the_default_executor_free() -> None:
    hanging = HangingResolver(hang=1)
    resolver = Resolver(hanging, threads=1, timeout_s=0.2)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        # a small default executor: a lookup on it would take its only thread
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        with pytest.raises(ResolveError, match="no answer"):
            await resolver.resolve(HOST, 80)
        assert hanging.entered.is_set() and resolver.busy == 1  # still hanging
        # what else runs on threads is not held up by it
        assert await loop.run_in_executor(None, lambda: "free") == "free"
        assert await asyncio.to_thread(lambda: "free too") == "free too"
        # its one thread is taken: the next lookup fails at once, starting no thread
        with pytest.raises(ResolveError, match="every resolver thread"):
            await resolver.resolve(HOST, 80)
        assert hanging.calls == 1
        hanging.release.set()  # the hung lookup returns: its slot is free again
        await _until(lambda: resolver.busy == 0)
        assert await resolver.resolve(HOST, 80) == ["127.0.0.1"]

    try:
        asyncio.run(main())
    finally:
        hanging.release.set()


def test_a_push_whose_host_does_not_resolve_is_retried_and_delivered_later() -> None:
    """Through ``Pushes``: the hanging lookup fails its attempt as a network error (a
    retry, not a failure), a push to an address goes on meanwhile, and once the resolver
    answers the final is delivered."""
    hanging = HangingResolver(hang=1)
    resolver = Resolver(hanging, threads=1, timeout_s=0.2)
    with Receiver() as named, Receiver() as direct:
        port = named.server.server_address[1]
        specs = [OutputSpec(index=0, type="webhook", url=f"http://{HOST}:{port}/hook",
                            host=HOST, lang="de", secret="s"),
                 OutputSpec(index=1, type="webhook", url=direct.url + "/hook",
                            host="127.0.0.1", lang="de", secret="s")]
        policy = HostPolicy.from_entries([HOST, "127.0.0.1"])

        async def main() -> list[dict]:
            pushes = Pushes(specs, policy, TIMES, resolver=resolver)
            try:
                pushes.final(INFO, "de", TranscriptLine(segment=0, start_s=0.0, end_s=1.0,
                                                        source="Hello.", text="Hallo."))
                await _until(lambda: pushes.stats("de")[0]["retries"] >= 2)
                assert pushes.stats("de")[1]["delivered"] == 1  # not held up
                assert not named.requests and pushes.stats("de")[0]["failed"] == 0
                assert await asyncio.to_thread(lambda: 1) == 1  # threads free
                hanging.release.set()
                await _until(lambda: pushes.stats("de")[0]["delivered"] == 1)
                return pushes.stats("de")
            finally:
                hanging.release.set()
                pushes.close()
                await asyncio.wait_for(pushes.flush(), 30)

        stats = asyncio.run(main())
        assert len(named.wait_for(1)) == 1 and len(direct.wait_for(1)) == 1
    assert stats[0]["failed"] == 0 and hanging.calls >= 2
