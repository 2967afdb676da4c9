"""The worker on a stand-in engine object: ordering, limits, cancellation.

(The worker never looks inside the engine; the real model runs in the API tests.)
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.engine.worker import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    EngineWorker,
    JobCancelledError,
    QueueFullError,
)


def test_priority_queue_limits_and_cancel() -> None:
    gate = threading.Event()
    order: list[str] = []
    worker = EngineWorker(engine=object(), max_queue=3)  # type: ignore[arg-type]

    def job(name: str):
        def run(_engine):
            if name == "blocker":
                gate.wait(5)
            order.append(name)
            return name
        return run

    async def main() -> None:
        blocker = asyncio.create_task(worker.submit(job("blocker")))
        await asyncio.sleep(0.05)
        partial = asyncio.create_task(worker.submit(job("partial"), priority=PRIORITY_PARTIAL))
        cancel = threading.Event()
        dropped = asyncio.create_task(worker.submit(job("dropped"), cancel=cancel))
        final = asyncio.create_task(worker.submit(job("final"), priority=PRIORITY_FINAL))
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFullError):
            await worker.submit(job("overflow"))
        # finals get in even when the queue is full
        extra = asyncio.create_task(worker.submit(job("final2"), priority=PRIORITY_FINAL,
                                                  bypass_limit=True))
        cancel.set()
        await asyncio.sleep(0.05)
        gate.set()
        assert await blocker == "blocker"
        with pytest.raises(JobCancelledError):
            await dropped
        assert await final == "final" and await extra == "final2"
        assert await partial == "partial"

    asyncio.run(main())
    assert order == ["blocker", "final", "final2", "partial"]
    worker.shutdown()


def test_awaiting_task_cancellation_sets_the_job_cancel_flag() -> None:
    seen = threading.Event()
    flag_seen: list[bool] = []
    worker = EngineWorker(engine=object(), max_queue=3)  # type: ignore[arg-type]
    cancel = threading.Event()

    def run(_engine):
        seen.set()
        deadline = time.monotonic() + 5
        while not cancel.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        flag_seen.append(cancel.is_set())

    async def main() -> None:
        task = asyncio.create_task(worker.submit(run, cancel=cancel))
        await asyncio.to_thread(seen.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    worker.shutdown()
    assert flag_seen == [True]


def test_only_typed_input_errors_skip_the_traceback(caplog) -> None:
    """A ValueError from deep inside a job is a bug (logged, marked); the project's typed
    input errors are the caller's (forwarded quietly)."""
    from app.engine.engine import ContextOverflowError
    from app.engine.worker import was_logged

    worker = EngineWorker(engine=object(), max_queue=4)  # type: ignore[arg-type]

    def raising(exc: BaseException):
        def run(_engine):
            raise exc
        return run

    async def main() -> tuple[BaseException, BaseException]:
        with pytest.raises(ValueError) as bug:
            await worker.submit(raising(ValueError("seed must be non-negative")))
        with pytest.raises(ContextOverflowError) as caller:
            await worker.submit(raising(ContextOverflowError("prompt of 9000 tokens")))
        return bug.value, caller.value

    with caplog.at_level("ERROR", logger="livetrans.worker"):
        bug, caller = asyncio.run(main())
    worker.shutdown()
    logged = [r for r in caplog.records if r.name == "livetrans.worker"]
    assert len(logged) == 1 and logged[0].exc_info and logged[0].exc_info[1] is bug
    assert was_logged(bug) and not was_logged(caller)
