"""llama.cpp behind the translation backend seam (``app.translation.backend``).

``LlamaBackend`` adapts an engine as a job sees it: the server's per-job
``ScheduledEngine`` (``app.engine.worker``: its ``generate`` files the generation with the
step scheduler and blocks until it is done) or the benchmarks' ``Engine`` (one generation
alone, on the caller's thread). Tokens come from the engine's runtime (``LlamaRuntime``,
whose vocabulary is thread-safe). ``LlamaRunner`` runs translation jobs on the
``EngineWorker``: each job gets a ``LlamaBackend`` over its ``ScheduledEngine``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from app.engine.engine import Engine, GenerationRequest, GenerationResult
from app.engine.worker import PRIORITY_REQUEST, EngineWorker, ScheduledEngine

T = TypeVar("T")


class LlamaBackend:
    """A ``TranslationBackend`` over a llama.cpp engine (scheduled or standalone)."""

    def __init__(self, engine: ScheduledEngine | Engine) -> None:
        self.engine = engine
        self.rt = engine.rt  # the runtime: tokens, vocabulary (drafters read it too)

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        return self.rt.tokenize(text, add_bos, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.rt.detokenize(tokens)

    def token_bytes(self, token: int) -> bytes:
        return self.rt.token_bytes(token)

    def generate(self, req: GenerationRequest) -> GenerationResult:
        return self.engine.generate(req)


class LlamaRunner:
    """A ``BackendRunner`` on the ``EngineWorker``: a job runs on a thread of its own and
    its generations join the step scheduler's batched forward passes."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker

    async def run(self, job: Callable[[LlamaBackend], T], *,
                  priority: int = PRIORITY_REQUEST, cancel: threading.Event | None = None,
                  bypass_limit: bool = False, started: threading.Event | None = None,
                  queue_seq: int | None = None) -> T:
        def on_engine(engine: ScheduledEngine) -> T:
            return job(LlamaBackend(engine))

        return await self.worker.submit(on_engine, priority=priority, cancel=cancel,
                                        bypass_limit=bypass_limit, started=started,
                                        seq=queue_seq)
