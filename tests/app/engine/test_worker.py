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
from tests.engine_hold import EngineHold


def _request(rt, source: str = "Good morning, everyone.") -> GenerationRequest:
    prompt = rt.tokenize(FewShotFormat().translation(source, "en", "de").text, add_bos=True)
    return GenerationRequest(prompt_tokens=prompt, max_tokens=16, stop_strings=("\n",))


def _value(value: object):  # noqa: ANN202 - a job
    async def job(_engine) -> object:  # noqa: ANN001
        return value
    return job


def test_queue_bound_counts_waiting_jobs_and_finals_bypass_it() -> None:
    worker = EngineWorker(engine=object(), max_queue=2)  # type: ignore[arg-type]

    async def main() -> None:
        gate = asyncio.Event()

        async def wait(_engine) -> None:  # noqa: ANN001
            await asyncio.wait_for(gate.wait(), 10)

        held = [asyncio.create_task(worker.submit(wait)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(QueueFullError):
            await worker.submit(_value(None))
        final = asyncio.create_task(worker.submit(_value("final"), priority=PRIORITY_FINAL,
                                                  bypass_limit=True))
        assert await final == "final"
        gate.set()
        await asyncio.gather(*held)
        assert worker.depth == 0
        await worker.shutdown(timeout=5)

    asyncio.run(main())


def test_a_job_awaits_its_generation_without_a_thread_of_its_own(engine) -> None:
    """Jobs are tasks on the event loop: many wait on the scheduler with no thread each."""
    worker = EngineWorker(engine, max_queue=16)
    req = _request(engine.rt)

    async def main() -> list:
        async def job(e) -> object:  # noqa: ANN001
            return await e.generate(req)

        # one generation first: every later one reuses its prompt's cache, so all eight
        # run in the same batch shapes (a cold prompt's shape may flip a near-tie)
        await worker.submit(job)
        before = threading.active_count()
        tasks = [asyncio.create_task(worker.submit(job)) for _ in range(8)]
        await asyncio.sleep(0.05)
        threads_while_waiting = threading.active_count()
        results = await asyncio.gather(*tasks)
        await worker.shutdown(timeout=10)
        assert threads_while_waiting == before
        return results

    results = asyncio.run(main())
    assert len({r.text for r in results}) == 1 and results[0].text.strip()


def test_a_job_cancelled_while_waiting_costs_no_forward_pass(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    req = _request(engine.rt)

    async def generate(e):  # noqa: ANN001, ANN202
        return await e.generate(req)

    async def main() -> None:
        hold = EngineHold(worker)
        await asyncio.to_thread(hold.start)  # the engine is held, in the hold's own pass
        passes = engine.forward_passes
        waiting = asyncio.create_task(worker.submit(generate))
        await asyncio.sleep(0.1)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.to_thread(hold.release)
        assert engine.forward_passes == passes + 1  # the hold's pass, and no other
        await worker.shutdown(timeout=10)

    asyncio.run(main())


def test_cancel_flag_set_before_start_raises_job_cancelled(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    cancel = threading.Event()
    cancel.set()
    req = _request(engine.rt)

    async def generate(e):  # noqa: ANN001, ANN202
        return await e.generate(req)

    async def main() -> None:
        with pytest.raises(JobCancelledError):
            await worker.submit(generate, cancel=cancel)
        await worker.shutdown(timeout=10)

    asyncio.run(main())


def test_awaiting_task_cancellation_sets_the_job_cancel_flag() -> None:
    seen = threading.Event()
    flag_seen: list[bool] = []
    worker = EngineWorker(engine=object(), max_queue=3)  # type: ignore[arg-type]
    cancel = threading.Event()

    async def run(_engine) -> None:  # noqa: ANN001
        seen.set()
        deadline = time.monotonic() + 5
        while not cancel.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        flag_seen.append(cancel.is_set())

    async def main() -> None:
        task = asyncio.create_task(worker.submit(run, cancel=cancel))
        await asyncio.to_thread(seen.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await worker.shutdown(timeout=5)

    asyncio.run(main())
    assert flag_seen == [True]


def test_only_typed_input_errors_skip_the_traceback(caplog) -> None:
    """A ValueError from deep inside a job is a bug (logged, marked); the project's typed
    input errors are the caller's (forwarded quietly)."""
    from app.engine.engine import ContextOverflowError
    from app.engine.worker import was_logged

    worker = EngineWorker(engine=object(), max_queue=4)  # type: ignore[arg-type]

    def raising(exc: BaseException):  # noqa: ANN202
        async def run(_engine):  # noqa: ANN001, ANN202
            raise exc
        return run

    async def main() -> tuple[BaseException, BaseException]:
        with pytest.raises(ValueError) as bug:
            await worker.submit(raising(ValueError("seed must be non-negative")))
        with pytest.raises(ContextOverflowError) as caller:
            await worker.submit(raising(ContextOverflowError("prompt of 9000 tokens")))
        await worker.shutdown(timeout=5)
        return bug.value, caller.value

    with caplog.at_level("ERROR", logger="livetrans.worker"):
        bug, caller = asyncio.run(main())
    logged = [r for r in caplog.records if r.name == "livetrans.worker"]
    assert len(logged) == 1 and logged[0].exc_info and logged[0].exc_info[1] is bug
    assert was_logged(bug) and not was_logged(caller)


def test_shutdown_lets_accepted_work_finish_within_the_grace(engine) -> None:
    worker = EngineWorker(engine, max_queue=4)
    req = _request(engine.rt, "Thank you all for coming.")

    async def generate(e):  # noqa: ANN001, ANN202
        return await e.generate(req)

    async def main():  # noqa: ANN202
        final = asyncio.create_task(worker.submit(generate, priority=PRIORITY_FINAL))
        deadline = time.monotonic() + 10
        while worker.scheduler.busy_since is None and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # the final is accepted and running
        await worker.shutdown(timeout=60)
        return await final

    result = asyncio.run(main())
    assert result.finish_reason != "cancelled" and result.text.strip()
