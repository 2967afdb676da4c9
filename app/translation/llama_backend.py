"""llama.cpp behind the translation backend seam (``app.translation.backend``).

``LlamaBackend`` adapts the server's per-job ``ScheduledEngine`` (``app.engine.worker``):
its ``generate`` files the generation with the step scheduler and awaits the future the
scheduler completes. ``StandaloneLlamaBackend`` adapts the benchmarks' ``Engine``: one
generation alone, computed on the caller's thread inside ``generate`` (it never suspends,
so ``run_to_end`` drives a job over it without an event loop). Tokens come from the
engine's runtime (``LlamaRuntime``, whose vocabulary is thread-safe). ``LlamaRunner`` runs
translation jobs on the ``EngineWorker``: each job gets a ``LlamaBackend`` over its
``ScheduledEngine``; it is also the server's ``BackendService`` (health, queue positions,
detokenizing outside a job, shutdown), so nothing above ``app.translation`` holds the
worker.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from app.engine.engine import Engine, GenerationRequest, GenerationResult
from app.engine.worker import PRIORITY_REQUEST, EngineWorker, ScheduledEngine
from app.translation.backend_types import BackendHealth

T = TypeVar("T")


class _LlamaTokens:
    """The token half of the seam, from the engine's runtime."""

    def __init__(self, engine: ScheduledEngine | Engine) -> None:
        self.rt = engine.rt  # the runtime: tokens, vocabulary (drafters read it too)

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        return self.rt.tokenize(text, add_bos, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.rt.detokenize(tokens)

    def token_bytes(self, token: int) -> bytes:
        return self.rt.token_bytes(token)


class LlamaBackend(_LlamaTokens):
    """A ``TranslationBackend`` over the step scheduler (the server's path)."""

    def __init__(self, engine: ScheduledEngine) -> None:
        super().__init__(engine)
        self.engine = engine

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        return await self.engine.generate(req)


class StandaloneLlamaBackend(_LlamaTokens):
    """A ``TranslationBackend`` over a bare ``Engine`` (benchmarks, evaluation, tests):
    each generation runs alone, at once, on the calling thread."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.engine = engine

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        return self.engine.generate(req)


class LlamaRunner:
    """A ``BackendService`` on the ``EngineWorker``: a job is a task on the event loop and
    its generations join the step scheduler's batched forward passes."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker

    async def run(self, job: Callable[[LlamaBackend], Awaitable[T]], *,
                  priority: int = PRIORITY_REQUEST, cancel: threading.Event | None = None,
                  bypass_limit: bool = False, started: threading.Event | None = None,
                  queue_seq: int | None = None) -> T:
        async def on_engine(engine: ScheduledEngine) -> T:
            return await job(LlamaBackend(engine))

        return await self.worker.submit(on_engine, priority=priority, cancel=cancel,
                                        bypass_limit=bypass_limit, started=started,
                                        seq=queue_seq)

    def health(self) -> BackendHealth:
        return BackendHealth(queue_depth=self.worker.depth, broken=self.worker.broken)

    def overload(self) -> str | None:
        return self.worker.overload()

    def next_seq(self) -> int:
        return self.worker.next_seq()

    def detokenize(self, tokens: list[int]) -> str:
        return self.worker.engine.rt.detokenize(tokens)

    def token_bytes(self, token: int) -> bytes:
        return self.worker.engine.rt.token_bytes(token)

    async def shutdown(self, timeout: float) -> None:
        await self.worker.shutdown(timeout)
