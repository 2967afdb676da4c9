"""Engine jobs: cancellation, bounds and error classification of ``EngineWorker``."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.engine.engine import GenerationRequest
from app.engine.worker import (
    PRIORITY_FINAL,
    EngineWorker,
    JobCancelledError,
    QueueFullError,
)
from app.translation.prompts import FewShotFormat


def _request(rt, source: str = "Good morning, everyone.") -> GenerationRequest:
    prompt = rt.tokenize(FewShotFormat().translation(source, "en", "de").text, add_bos=True)
    return GenerationRequest(prompt_tokens=prompt, max_tokens=16, stop_strings=("\n",))


def test_queue_bound_counts_waiting_jobs_and_finals_bypass_it() -> None:
    worker = EngineWorker(engine=object(), max_queue=2)  # type: ignore[arg-type]
    gate = threading.Event()

    async def main() -> None:
        held = [asyncio.create_task(worker.submit(lambda _e: gate.wait(10))) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFullError):
            await worker.submit(lambda _e: None)
        final = asyncio.create_task(worker.submit(lambda _e: "final", priority=PRIORITY_FINAL,
                                                  bypass_limit=True))
        assert await final == "final"
        gate.set()
        await asyncio.gather(*held)

    asyncio.run(main())
    assert worker.depth == 0
    worker.shutdown(timeout=5)


def test_a_job_cancelled_while_waiting_costs_no_forward_pass(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    gate = threading.Event()
    passes = engine.forward_passes
    req = _request(engine.rt)

    async def main() -> None:
        blocker = asyncio.create_task(worker.submit(lambda _e: gate.wait(10), exclusive=True))
        await asyncio.sleep(0.1)  # the engine is held
        waiting = asyncio.create_task(worker.submit(lambda e: e.generate(req)))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gate.set()
        await blocker

    asyncio.run(main())
    worker.shutdown(timeout=10)
    assert engine.forward_passes == passes


def test_cancel_flag_set_before_start_raises_job_cancelled(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    cancel = threading.Event()
    cancel.set()
    req = _request(engine.rt)

    async def main() -> None:
        with pytest.raises(JobCancelledError):
            await worker.submit(lambda e: e.generate(req), cancel=cancel)

    asyncio.run(main())
    worker.shutdown(timeout=10)


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
    worker.shutdown(timeout=5)
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
    worker.shutdown(timeout=5)
    logged = [r for r in caplog.records if r.name == "livetrans.worker"]
    assert len(logged) == 1 and logged[0].exc_info and logged[0].exc_info[1] is bug
    assert was_logged(bug) and not was_logged(caller)


def test_shutdown_lets_accepted_work_finish_within_the_grace(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    req = _request(engine.rt, "Thank you all for coming.")
    results: list = []

    def submit_and_keep() -> None:
        results.append(asyncio.run(worker.submit(lambda e: e.generate(req),
                                                  priority=PRIORITY_FINAL)))

    thread = threading.Thread(target=submit_and_keep)
    thread.start()
    deadline = time.monotonic() + 10
    while worker.scheduler.busy_since is None and time.monotonic() < deadline:
        time.sleep(0.005)  # the final is accepted and running
    worker.shutdown(timeout=60)
    thread.join(5)
    assert results and results[0].finish_reason != "cancelled" and results[0].text.strip()
