"""The step scheduler's supervisor, without the model: an exception outside the forward pass
restarts the loop (logged once, counted) and no job waits forever; a failure tied to one
generation fails that one only; a loop that keeps failing, or a thread that ends, breaks the
scheduler and every job ends with an error naming why.

The engine is the real ``Engine`` (its sequences, KV slots and bookkeeping) over a stand-in
runtime whose forward passes compute nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

from app.engine.engine import Engine, GenerationRequest
from app.engine.scheduler import (
    PRIORITY_REQUEST,
    GenerationFailedError,
    SchedulerBrokenError,
    SchedulerConfig,
    StepScheduler,
    Ticket,
)
from app.engine.worker import EngineWorker

WAIT_S = 30  # generous: these wait for something to happen, they time nothing
FAST = SchedulerConfig(restart_backoff_s=(0.01, 0.01))


class FakeRuntime:
    """Just enough of ``LlamaRuntime`` for the scheduler: each forward pass "predicts"
    token 1, so a generation runs to its ``max_tokens``. ``refuse_cut`` makes cutting a
    sequence back (not emptying it) fail, as a recurrent model's cache does."""

    n_ctx = 256
    n_vocab = 4

    def __init__(self, n_seq: int = 1) -> None:
        self.n_seq = n_seq
        self.refuse_cut = False
        self.clears = 0

    def is_eog(self, token: int) -> bool:
        return token == 0

    def token_bytes(self, token: int) -> bytes:
        return b" x"

    def decode_rows(self, rows: list) -> None:
        pass

    def logits_row(self, index: int) -> np.ndarray:
        row = np.zeros(self.n_vocab, dtype=np.float32)
        row[1] = 1.0
        return row

    def truncate(self, pos: int, seq: int = 0) -> None:
        if pos > 0 and self.refuse_cut:
            raise RuntimeError(f"this cache cannot be cut back to {pos}")

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        pass

    def clear(self) -> None:
        self.clears += 1


class Boom(RuntimeError):
    """The injected failure."""


def _engine(n_seq: int = 1) -> Engine:
    return Engine(FakeRuntime(n_seq))  # type: ignore[arg-type]


def _request(prompt: list[int] | None = None) -> GenerationRequest:
    return GenerationRequest(prompt_tokens=prompt or [2, 3, 2, 3, 2], max_tokens=4)


def _submit(sched: StepScheduler, req: GenerationRequest, order: int = 0) -> Ticket:
    return sched.submit(sched.engine.start(req), priority=PRIORITY_REQUEST,
                        client=f"c{order}", order=order, cancel=threading.Event())


def _outcome(sched: StepScheduler, ticket: Ticket):
    """The ticket's result, or its error (returned, not raised)."""
    assert ticket.done.wait(WAIT_S), "the job still waits"
    try:
        return sched.run(ticket)
    except Exception as exc:  # noqa: BLE001 - the test looks at it
        return exc


def _raise_once(exc: BaseException):
    fired: list[BaseException] = []

    def on_step(*_args) -> None:
        if not fired:
            fired.append(exc)
            raise exc

    return on_step


def _always(exc_type: type[BaseException]):
    def on_step(*_args) -> None:
        raise exc_type("the step callback failed")

    return on_step


def _errors(caplog, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno >= logging.ERROR]


def test_an_exception_in_the_loop_is_logged_once_counted_and_the_loop_comes_back(caplog):
    injected = Boom("the metrics callback failed")
    restarts: list[str] = []
    sched = StepScheduler(_engine(), on_step=_raise_once(injected), on_restart=restarts.append)
    try:
        with caplog.at_level(logging.ERROR, logger="livetrans.scheduler"):
            first = _outcome(sched, _submit(sched, _request()))
            after = _outcome(sched, _submit(sched, _request([3, 2, 3]), order=1))
    finally:
        sched.stop()
    # the generation that ran when the loop failed was requeued and finished
    assert first.finish_reason == "length" and len(first.tokens) == 4
    assert after.finish_reason == "length" and len(after.tokens) == 4
    assert restarts == ["scheduler"] and sched.restarts == 1
    logged = _errors(caplog, "livetrans.scheduler")
    assert len(logged) == 1 and logged[0].exc_info[1] is injected
    assert sched.broken is None
    assert sched.engine.rt.clears >= 1  # the restart forgot every cache


def test_a_failed_admission_fails_that_job_only(caplog):
    """A recurrent model refuses to cut a sequence's cache back: the generation being
    admitted fails with an error naming the step; the next one gets the sequence, clean."""
    engine = _engine(n_seq=1)
    restarts: list[str] = []
    sched = StepScheduler(engine, on_restart=restarts.append)
    try:
        warm = _outcome(sched, _submit(sched, _request([2, 3, 2, 3, 2])))
        assert warm.finish_reason == "length"
        engine.rt.refuse_cut = True
        # shares a prefix with what the sequence caches: admitting it cuts the cache back
        with caplog.at_level(logging.ERROR, logger="livetrans.scheduler"):
            failing = _submit(sched, _request([2, 3, 9]), order=1)
            other = _submit(sched, _request([2, 3, 9]), order=2)
            failed, done = _outcome(sched, failing), _outcome(sched, other)
    finally:
        sched.stop()
    assert isinstance(failed, GenerationFailedError)
    assert "admitting the generation to a sequence failed" in str(failed)
    assert "cannot be cut back" in str(failed)
    assert done.finish_reason == "length" and len(done.tokens) == 4
    assert restarts == [] and sched.broken is None
    assert len(_errors(caplog, "livetrans.scheduler")) == 1


def test_a_failure_handing_a_generation_back_fails_that_job_only():
    engine = _engine(n_seq=2)
    sched = StepScheduler(engine)
    unlucky_gen = engine.start(_request([2, 2, 2]))
    counted = engine.finished

    def finished(gen) -> None:
        if gen is unlucky_gen:
            raise Boom("a counter failed")
        counted(gen)

    engine.finished = finished  # type: ignore[method-assign]
    try:
        unlucky = sched.submit(unlucky_gen, priority=PRIORITY_REQUEST, client="c0", order=0,
                               cancel=threading.Event())
        lucky = _submit(sched, _request([3, 3, 3]), order=1)
        failed, done = _outcome(sched, unlucky), _outcome(sched, lucky)
    finally:
        sched.stop()
    assert isinstance(failed, GenerationFailedError)
    assert "handing the generation back failed: Boom: a counter failed" in str(failed)
    assert done.finish_reason == "length"
    assert sched.restarts == 0 and sched.broken is None


def test_a_loop_that_keeps_failing_breaks_the_scheduler_and_ends_every_job():
    restarts: list[str] = []
    sched = StepScheduler(_engine(n_seq=1), FAST, on_step=_always(Boom),
                          on_restart=restarts.append)
    try:
        running = _submit(sched, _request([2, 2, 2]), order=0)
        waiting = _submit(sched, _request([3, 3, 3]), order=1)
        errors = [_outcome(sched, running), _outcome(sched, waiting)]
        later = _outcome(sched, _submit(sched, _request(), order=2))
    finally:
        sched.stop()
    for exc in [*errors, later]:
        assert isinstance(exc, SchedulerBrokenError)
        assert "failed 3 times in a row (last: Boom: the step callback failed)" in str(exc)
    assert restarts == ["scheduler", "scheduler"]
    assert sched.broken is not None and "\n" not in sched.broken


def test_a_thread_that_ends_breaks_the_scheduler():
    """An exception the supervisor does not restart after (``SystemExit``) ends the
    thread; its jobs still end, with an error naming that."""
    sched = StepScheduler(_engine(), on_step=_always(SystemExit))
    try:
        failed = _outcome(sched, _submit(sched, _request()))
    finally:
        sched.stop()
    assert isinstance(failed, SchedulerBrokenError)
    assert "ended unexpectedly (SystemExit: the step callback failed)" in str(failed)
    assert sched.broken == str(failed)


def test_a_broken_worker_refuses_jobs_at_once_and_logs_the_cause_once(caplog):
    engine = _engine()
    worker = EngineWorker(engine, scheduler=FAST, on_step=_always(Boom))
    req = _request()

    async def generate(e):  # noqa: ANN001, ANN202
        return await e.generate(req)

    async def main() -> tuple[BaseException, BaseException]:
        with pytest.raises(SchedulerBrokenError) as waited:
            await worker.submit(generate)
        with pytest.raises(SchedulerBrokenError) as refused:
            await worker.submit(generate)
        await worker.shutdown(timeout=5)
        return waited.value, refused.value

    with caplog.at_level(logging.ERROR):
        waited, refused = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    assert worker.broken is not None and str(refused) == worker.broken == str(waited)
    assert worker.depth == 0
    assert _errors(caplog, "livetrans.worker") == []  # the scheduler logged it
