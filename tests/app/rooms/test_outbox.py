"""The outbox between the speaker and a store that may go away: writes in order, partials
dropped while the store is down, finals kept and retried until it returns, bounded."""

from __future__ import annotations

import asyncio

import pytest

from app.rooms import outbox as outbox_module
from app.rooms.outbox import Outbox, StoreUnavailable, Write


class FlakyStore:
    def __init__(self) -> None:
        self.up = True
        self.written: list[str] = []

    def write(self, item: str) -> Write:
        async def run() -> None:
            if not self.up:
                raise StoreUnavailable("connection refused")
            self.written.append(item)

        return Write(run, keep=item.startswith("final"), what=item)


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_module, "RETRY_S", (0.01,))


def test_writes_are_made_in_order() -> None:
    async def scenario() -> list[str]:
        store, box = FlakyStore(), Outbox("test")
        task = asyncio.create_task(box.run())
        for i in range(20):
            box.put(store.write(f"final {i}" if i % 3 == 0 else f"partial {i}"))
        assert await box.drain(5)
        task.cancel()
        return store.written

    assert asyncio.run(scenario()) == [
        f"final {i}" if i % 3 == 0 else f"partial {i}" for i in range(20)]


def test_an_outage_drops_partials_keeps_finals_and_reports_once() -> None:
    async def scenario() -> tuple[list[str], list[bool], int, int]:
        store, states, errors = FlakyStore(), [], []
        box = Outbox("test", on_up=states.append, on_error=lambda: errors.append(1))
        task = asyncio.create_task(box.run())
        store.up = False
        box.put(store.write("final 0"))
        await asyncio.sleep(0.05)  # the store is found down
        for item in ("partial 1", "final 2", "partial 3", "final 4"):
            box.put(store.write(item))
        await asyncio.sleep(0.05)
        assert box.kept == 3 and not box.up
        store.up = True
        assert await box.drain(5)
        task.cancel()
        return store.written, states, box.dropped, len(errors)

    written, states, dropped, errors = asyncio.run(scenario())
    assert written == ["final 0", "final 2", "final 4"]  # nothing acknowledged is lost
    assert states == [False, True] and dropped == 2 and errors >= 1


def test_kept_writes_are_bounded_in_bytes_oldest_first() -> None:
    cost = Write(lambda: None, keep=True, size=1000).cost
    store, box = FlakyStore(), Outbox("test", max_kept_bytes=3 * cost, max_droppable=2)
    for i in range(5):
        write = store.write(f"final {i}")
        write.size = 1000
        box.put(write)
    assert [w.what for w in box.writes] == ["final 2", "final 3", "final 4"]
    assert box.lost == 2 and box.kept_bytes == 3 * cost
    for i in range(5):
        box.put(store.write(f"partial {i}"))
    assert box.dropped == 3 and len(box) == 5


def test_a_large_write_evicts_by_bytes_not_by_count() -> None:
    small = Write(lambda: None, keep=True, size=10).cost
    store, box = FlakyStore(), Outbox("test", max_kept_bytes=50 * small)
    for i in range(40):
        write = store.write(f"final {i}")
        write.size = 10
        box.put(write)
    big = store.write("final big")
    big.size = 20 * small
    box.put(big)  # ~21 small writes' worth: the 11 oldest small ones go
    assert box.lost == 11 and box.kept_bytes <= 50 * small
    assert box.writes[-1] is big and box.writes[0].what == "final 11"


def test_the_write_in_flight_is_never_evicted() -> None:
    """A full outbox evicts the oldest waiting write, not the one being made: its outcome
    (and a caller waiting on it) is still coming."""
    async def scenario() -> tuple[list[str], int]:
        started, release = asyncio.Event(), asyncio.Event()
        written: list[str] = []
        cost = Write(lambda: None, keep=True, size=100).cost

        def write(name: str) -> Write:
            async def run() -> None:
                if name == "final 0":
                    started.set()
                    await release.wait()
                written.append(name)

            return Write(run, keep=True, what=name, size=100)

        box = Outbox("test", max_kept_bytes=2 * cost)
        task = asyncio.create_task(box.run())
        box.put(write("final 0"))
        await started.wait()  # final 0 is being made now
        for i in range(1, 4):
            box.put(write(f"final {i}"))
        release.set()
        assert await box.drain(5)
        task.cancel()
        return written, box.lost

    written, lost = asyncio.run(scenario())
    assert written[0] == "final 0" and written[-1] == "final 3" and lost == 2


def test_a_bug_in_one_write_does_not_stop_the_rest() -> None:
    async def scenario() -> list[str]:
        store, box = FlakyStore(), Outbox("test")

        async def broken() -> None:
            raise KeyError("bug")

        task = asyncio.create_task(box.run())
        box.put(Write(broken, keep=True, what="broken"))
        box.put(store.write("final 1"))
        assert await box.drain(5)
        task.cancel()
        return store.written

    assert asyncio.run(scenario()) == ["final 1"]


def test_a_waited_write_completes_only_once_the_store_has_it() -> None:
    async def scenario() -> tuple[bool, bool, list[str]]:
        store, box = FlakyStore(), Outbox("test")
        task = asyncio.create_task(box.run())
        store.up = False
        release = store.write("final release")
        release.done = asyncio.get_running_loop().create_future()
        box.put(release)
        await asyncio.sleep(0.05)
        while_down = release.done.done()
        store.up = True
        await asyncio.wait_for(release.done, 5)
        task.cancel()
        return while_down, release.done.done(), store.written

    while_down, landed, written = asyncio.run(scenario())
    assert not while_down and landed and written == ["final release"]


def test_a_barrier_completes_after_every_earlier_write() -> None:
    async def scenario() -> tuple[bool, list[str]]:
        store, box = FlakyStore(), Outbox("test")
        task = asyncio.create_task(box.run())
        store.up = False
        box.put(store.write("final 0"))
        box.put(store.write("final 1"))
        barrier = box.barrier()
        await asyncio.sleep(0.05)
        early = barrier.done()
        store.up = True
        await asyncio.wait_for(barrier, 5)
        task.cancel()
        return early, store.written

    early, written = asyncio.run(scenario())
    assert not early and written == ["final 0", "final 1"]


@pytest.mark.parametrize("turned_into", [StoreUnavailable, KeyError])
def test_a_cancel_that_comes_back_as_an_error_stops_the_outbox(
        turned_into: type[Exception]) -> None:
    """Python 3.11's ``asyncio.timeout`` turns a cancel that meets its expiry into a
    ``TimeoutError`` (redis-py's reads run under one): the outbox must stop on it rather
    than retry, or skip, and write on."""
    async def scenario() -> tuple[bool, int]:
        box, tries = Outbox("test"), []

        async def write() -> None:
            tries.append(1)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if len(tries) > 1:
                    raise  # (without the guard: the retry is cancelled and the test ends)
                raise turned_into("timed out") from None

        task = asyncio.create_task(box.run())
        box.put(Write(write, keep=True, what="final"))
        box.put(Write(write, keep=True, what="final"))
        while not tries:
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=5)
        return task.cancelled(), len(tries)

    assert asyncio.run(scenario()) == (True, 1)  # stopped, never tried again
