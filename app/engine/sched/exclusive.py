"""Exclusive calls: a function of the raw engine, run on the scheduler's thread while no
generation runs and none is admitted.

Not a production mode: nothing in the server, the evaluation or the benchmarks asks for
it. Tests use it (through ``EngineWorker.submit(..., exclusive=True)``) to hold the engine
while work queues up, or to call the engine's sequence-0 primitives (``evaluate_prompt``,
``row``) with the context to themselves. It lives here, on top of the driver's four
idle-work hooks, so that neither the policy nor the driver's loop knows about it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from app.engine.sched.driver import StepScheduler

T = TypeVar("T")


class _Call:
    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            self.error = exc
        self.done.set()

    def end(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class ExclusiveScheduler(StepScheduler):
    """A ``StepScheduler`` that also runs exclusive calls (``run_exclusive``)."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - StepScheduler's
        self._calls: list[_Call] = []  # before the thread starts
        super().__init__(*args, **kwargs)

    def run_exclusive(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the scheduler thread once no sequence is running, with nothing else
        admitted meanwhile. Blocks until it has run; its value, or its exception raised."""
        call = _Call(fn)
        with self._cond:
            if self._broken is not None:
                raise self._broken_error()
            if self._stopping:
                raise RuntimeError("the scheduler has stopped")
            self._calls.append(call)
            self._cond.notify()
        self._wait(call.done)
        if call.error is not None:
            raise call.error
        return call.value  # type: ignore[return-value]

    def _has_idle_work(self) -> bool:
        return bool(self._calls)

    def _holding(self) -> bool:  # a call waits: admit nothing more
        return bool(self._calls)

    def _take_idle_work(self) -> Callable[[], None] | None:
        return self._calls.pop(0) if self._calls else None

    def _end_idle_work(self, error: Callable[[], BaseException]) -> None:
        for call in self._calls:
            call.end(error())
        self._calls.clear()
