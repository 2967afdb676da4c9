"""Supervised background tasks: an exception is logged with its traceback, counted, and the
task is back after its backoff; only cancellation stops it."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.supervision import Supervisor, reraise_lost_cancel, wait_event


def test_a_task_that_fails_once_is_back_after_its_backoff(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[int, list[str], dict[str, int]]:
        runs: list[int] = []
        restarted: list[str] = []
        supervisor = Supervisor(restarted.append, backoff_s=(0.01,))

        async def body() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise KeyError("injected")
            await asyncio.sleep(3600)

        supervisor.spawn("reader", body)
        for _ in range(200):
            if len(runs) == 2:
                break
            await asyncio.sleep(0.01)
        await supervisor.stop()
        return len(runs), restarted, supervisor.restarts

    with caplog.at_level(logging.ERROR, logger="livetrans.supervision"):
        runs, restarted, restarts = asyncio.run(scenario())
    assert runs == 2 and restarted == ["reader"] and restarts == {"reader": 1}
    failures = [r for r in caplog.records if "reader" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None  # once, with traceback


def test_the_backoff_grows_while_it_keeps_failing_and_a_return_ends_it() -> None:
    async def scenario() -> tuple[int, bool]:
        runs: list[float] = []
        supervisor = Supervisor(backoff_s=(0.01, 0.02, 0.04))

        async def body() -> None:
            runs.append(asyncio.get_running_loop().time())
            if len(runs) < 4:
                raise RuntimeError("again")

        task = supervisor.spawn("writer", body)
        await asyncio.wait_for(task, 5)  # the fourth run returns: done, not restarted
        gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
        return len(runs), gaps[2] >= gaps[0]

    runs, grew = asyncio.run(scenario())
    assert runs == 4 and grew


def test_a_failing_restart_counter_does_not_stop_the_task() -> None:
    async def scenario() -> int:
        runs: list[int] = []

        def broken_counter(name: str) -> None:
            raise ValueError(name)

        supervisor = Supervisor(broken_counter, backoff_s=(0.01,))

        async def body() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise RuntimeError("once")

        await asyncio.wait_for(supervisor.spawn("leases", body), 5)
        return len(runs)

    assert asyncio.run(scenario()) == 2


def test_stop_cancels_again_a_task_that_swallowed_its_cancel() -> None:
    """Python 3.11's ``wait_for`` (and some client libraries) can lose a cancel: the task
    reads on. ``stop`` cancels it again rather than waiting for it forever."""
    async def scenario() -> tuple[list[str], int]:
        swallowed: list[int] = []
        supervisor = Supervisor()

        async def body() -> None:
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    if swallowed:
                        raise
                    swallowed.append(1)  # as a lost cancel looks to the task

        task = supervisor.spawn("reader", body)
        await asyncio.sleep(0.01)
        stuck = await supervisor.stop(patience_s=30)
        assert task.done()
        return stuck, len(swallowed)

    assert asyncio.run(scenario()) == ([], 1)


def test_stop_gives_up_on_a_task_that_never_ends_and_names_it(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> tuple[list[str], bool]:
        supervisor = Supervisor()
        release = asyncio.Event()

        async def body() -> None:
            while not release.is_set():
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    continue

        supervisor.spawn("outbox", body)
        await asyncio.sleep(0.01)
        stuck = await supervisor.stop(patience_s=0.5)
        release.set()
        return stuck, not supervisor.tasks

    with caplog.at_level(logging.ERROR, logger="livetrans.supervision"):
        stuck, forgotten = asyncio.run(scenario())
    assert stuck == ["outbox"] and forgotten
    assert any("outbox" in r.getMessage() and "did not stop" in r.getMessage()
               for r in caplog.records)


def test_a_loop_that_retries_on_errors_stops_on_a_cancel_turned_into_one() -> None:
    """What redis-py does when a cancel meets its socket timeout (Python 3.11): the cancel
    comes back as a ``TimeoutError``. ``reraise_lost_cancel`` in the retry handler stops
    the task on the first cancel."""
    async def scenario() -> tuple[list[str], int]:
        supervisor, tries = Supervisor(), []

        async def read() -> None:
            tries.append(1)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise TimeoutError("Timeout reading from redis") from None

        async def retrying() -> None:
            while True:
                try:
                    await read()
                except TimeoutError:
                    reraise_lost_cancel()
                    await asyncio.sleep(0.01)

        supervisor.spawn("reader", retrying)
        await asyncio.sleep(0.01)
        stuck = await supervisor.stop(patience_s=30)
        return stuck, len(tries)

    assert asyncio.run(scenario()) == ([], 1)


def test_reraise_lost_cancel_is_quiet_in_a_task_never_cancelled() -> None:
    async def scenario() -> bool:
        reraise_lost_cancel()
        return True

    assert asyncio.run(scenario())


def test_wait_event_times_out_or_sees_the_event_and_never_loses_a_cancel() -> None:
    """A cancel lost on the way (the task still counts it) is raised by the next timeout
    rather than read as "the event did not come"."""
    async def scenario() -> tuple[bool, bool, bool]:
        event = asyncio.Event()
        timed_out = not await wait_event(event, 0.01)
        event.set()
        seen = await wait_event(event, 5)

        async def lost_then_waits() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # as a library that loses a cancel leaves the task
            await wait_event(asyncio.Event(), 0.01)

        task = asyncio.create_task(lost_then_waits())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait({task}, timeout=5)
        return timed_out, seen, task.cancelled()

    assert asyncio.run(scenario()) == (True, True, True)
