"""The translation backend seam: what the translator needs from a model, and nothing more.

``app.translation.translator`` runs one update as a *job*: a coroutine function of a
``TranslationBackend`` that tokenizes the prompt and the draft, awaits one generation
(or two, when a bad final is translated again), and judges the result. A
``BackendRunner`` runs such jobs where the model lives and awaits them from the event loop;
a ``BackendService`` is the runner as the server holds it (health, queue positions,
detokenizing, shutdown).

What a backend provides:

* **tokens**: ``tokenize`` (user text with ``special=False``, so a typed ``<eos>`` is text;
  our own prompt parts with ``special=True``), ``detokenize`` (a viewer's masked text, the
  glossary drafters) and ``token_bytes`` (one token's bytes: is it sentence-final
  punctuation, which the draft's end leaves unbiased);
* **a batched generate/verify**: ``await generate(GenerationRequest) -> GenerationResult``
  (awaitable, so that a job waiting for the model holds no thread; a backend batches the
  generations of concurrent jobs as it can). The
  request carries the prompt, the SSBD draft and its bias (``beta``, ``bias_limit``), the
  drafter chain and the bias of its proposals, the stops, the cancel flag and the streaming
  callback; the result carries the tokens and text, how it finished, the draft statistics
  (``result.drafts``: proposed / accepted by source) and the cost figures (prompt tokens
  and how many were cached, forward passes, decode and prompt milliseconds, time queued).
  A backend that cannot verify a draft treats it as a plain generation with no draft
  accepted (beta 0 is plain greedy decoding in any case).

The seam's vocabulary (``app.translation.backend_types``): the request and result, the
priority ranks, the errors the upper layers map to what a client hears
(``app.failures``), the per-update timings, the fair-share client identity and the health
view. Every layer above ``app.translation`` (``app.live``, ``app.api``, ``app.failures``)
names these from the seam and never imports ``app.engine``
(``tests/test_import_layers.py`` says so); a second backend raises and fills the same
types.

llama.cpp is the first implementation (``app.translation.llama_backend``: ``LlamaBackend``
over the step engine's per-job ``ScheduledEngine``, ``StandaloneLlamaBackend`` over the
benchmarks' ``Engine``, and ``LlamaRunner`` over the ``EngineWorker``). ``run_to_end``
runs a job over a backend that never suspends (the standalone one) without an event
loop, for the evaluation's synchronous code. Another backend (a CTranslate2 NLLB or Marian
model, a remote OpenAI-compatible server) implements ``TranslationBackend`` and
``BackendService`` and is handed to ``Translator`` and ``ServerState.backend`` by the
composition root (``app/server.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar, runtime_checkable

from app.translation.backend_types import (
    PRIORITY_FINAL,
    PRIORITY_NAMES,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    BackendHealth,
    ContextOverflowError,
    GenerationRequest,
    GenerationResult,
    JobCancelledError,
    QueueFullError,
    SchedulerBrokenError,
    ServerBusyError,
    UpdateTimings,
    WorkerStoppedError,
    client_identity,
    current_timings,
    mark_logged,
    was_logged,
)

__all__ = ["PRIORITY_FINAL", "PRIORITY_NAMES", "PRIORITY_PARTIAL", "PRIORITY_REQUEST",
           "BackendHealth", "BackendRunner", "BackendService", "ContextOverflowError",
           "GenerationRequest", "GenerationResult", "JobCancelledError", "QueueFullError",
           "SchedulerBrokenError", "ServerBusyError", "TranslationBackend", "UpdateTimings",
           "WorkerStoppedError", "client_identity", "current_timings", "mark_logged",
           "run_to_end", "was_logged"]

T = TypeVar("T")


@runtime_checkable
class TranslationBackend(Protocol):
    """A model as the translator uses it (see the module's docstring). A job awaits one
    ``generate`` at a time; ``tokenize``/``detokenize``/``token_bytes`` may be called from
    any thread."""

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        """Token ids of ``text``; ``special`` parses special-token text (``<eos>``)."""
        ...

    def detokenize(self, tokens: list[int]) -> str:
        """The text of ``tokens``."""
        ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token (a piece may be part of a UTF-8 character)."""
        ...

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        """One generation: prompt in, draft verified with its bias, tokens out."""
        ...


class BackendRunner(Protocol):
    """Runs translation jobs (coroutine functions of a ``TranslationBackend``) where the
    model lives, and awaits them on the event loop.

    ``priority``: the seam's ranks (``PRIORITY_FINAL``, ``PRIORITY_PARTIAL``,
    ``PRIORITY_REQUEST``: finals first). ``cancel`` ends the job's generation (the client
    went away, a newer partial superseded it); ``bypass_limit`` lets a final in when the
    queue is full; ``started`` is set when the job's first generation starts;
    ``queue_seq`` keeps the queue position of the job this one supersedes (``next_seq``).
    """

    async def run(self, job: Callable[[TranslationBackend], Awaitable[T]], *,
                  priority: int = PRIORITY_REQUEST, cancel: threading.Event | None = None,
                  bypass_limit: bool = False, started: threading.Event | None = None,
                  queue_seq: int | None = None) -> T:
        ...


class BackendService(BackendRunner, Protocol):
    """The runner as the server holds it (``ServerState.backend``): jobs in, plus what the
    routes and the live path read without running a job.

    Errors a job may raise, and what a client hears of each (``app.failures``):
    ``QueueFullError`` (429 ``queue_full``; ``ServerBusyError``, 429 ``busy``),
    ``JobCancelledError`` (499), ``WorkerStoppedError`` (503 ``shutting_down``),
    ``SchedulerBrokenError`` (503 ``engine_unavailable``) and ``ContextOverflowError``
    (413). Anything else is a bug: a 500, logged once (``mark_logged``).
    """

    def health(self) -> BackendHealth:
        """Queue depth and whether the backend can run jobs at all (``/health``)."""
        ...

    def overload(self) -> str | None:
        """Why new work must be refused right now (a live speaker, at admission), or None."""
        ...

    def next_seq(self) -> int:
        """A queue position a caller keeps across resubmissions (``queue_seq``)."""
        ...

    def detokenize(self, tokens: list[int]) -> str:
        """The text of ``tokens`` (a viewer's display mask), outside any job."""
        ...

    def token_bytes(self, token: int) -> bytes:
        """One token's bytes (append-only text cuts at words), outside any job."""
        ...

    async def shutdown(self, timeout: float) -> None:
        """Take no more jobs, let accepted ones finish for up to ``timeout`` seconds, stop."""
        ...


def run_to_end(job: Coroutine[Any, Any, T]) -> T:
    """The value of ``job``, a coroutine over a backend that never suspends (its
    ``generate`` computes on the calling thread: ``StandaloneLlamaBackend``), run here
    without an event loop. A job that does suspend is a misuse: it is closed and refused."""
    try:
        job.send(None)
    except StopIteration as done:
        return done.value
    job.close()
    raise RuntimeError("the job waited for its backend: run it on a BackendRunner")
