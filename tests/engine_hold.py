"""Holding the step scheduler inside one forward pass, for tests that need work to queue.

The scheduler's thread runs one pass at a time, and admits nothing while a pass runs. An
``EngineHold`` makes the next pass wait at a gate: it wraps the engine's ``step`` for one
call and files a one-token generation, whose pass then waits until ``release``. Work
submitted meanwhile waits in the queue exactly as it would behind a long pass of the real
server, and nothing in the production classes exists for the tests' sake.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from app.engine.engine import GenerationRequest
from app.engine.worker import EngineWorker, ScheduledEngine

HOLD_S = 60.0  # the longest a hold lasts: a bound against hanging, never a latency


class EngineHold:
    """``with EngineHold(worker):`` the engine is held (in a pass) until the block ends."""

    def __init__(self, worker: EngineWorker, hold_s: float = HOLD_S) -> None:
        self.worker = worker
        self.hold_s = hold_s
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.result: Any = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EngineHold:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def start(self) -> None:
        """Hold the engine; returns once the scheduler's thread is inside the held pass."""
        engine = self.worker.scheduler.engine
        real_step = engine.step

        def held_step(*args: Any) -> Any:
            engine.step = real_step  # only this one pass waits
            self.entered.set()
            self.gate.wait(self.hold_s)
            return real_step(*args)

        engine.step = held_step
        self._thread = threading.Thread(target=self._run_blocker, daemon=True)
        self._thread.start()
        if not self.entered.wait(self.hold_s):
            self.release()
            raise RuntimeError("the engine could not be held")

    def release(self) -> None:
        self.gate.set()
        if self._thread is not None:
            self._thread.join(self.hold_s)

    def _run_blocker(self) -> None:
        async def blocker(engine: ScheduledEngine) -> Any:
            prompt = engine.rt.tokenize("Hello.", add_bos=True)
            return await engine.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=1))

        self.result = asyncio.run(self.worker.submit(blocker, bypass_limit=True))
