"""What a job asks of the engine and how it can fail: plain values, no model, no thread.

Why a module of its own: the layers above the engine name these through the translation
backend seam (``app.translation.backend_types``), and a second backend raises the same
errors; neither should have to load the step scheduler or the llama.cpp runtime to do it.
The worker (``app.engine.worker``) and the scheduler's policy (``app.engine.sched.policy``)
import them from here and keep their old names.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["PRIORITY_FINAL", "PRIORITY_NAMES", "PRIORITY_PARTIAL", "PRIORITY_REQUEST",
           "JobCancelledError", "QueueFullError", "ServerBusyError", "WorkerStoppedError",
           "client_identity"]

# Job priorities. Finals rank first; partials and HTTP requests share one rank (fair share
# decides among them), but keep their own label for metrics and shutdown.
PRIORITY_FINAL = 0
PRIORITY_REQUEST = 1
PRIORITY_PARTIAL = 2
PRIORITY_NAMES = {PRIORITY_FINAL: "final", PRIORITY_REQUEST: "request",
                  PRIORITY_PARTIAL: "partial"}

# Who a job is for (an API key's hash, a connection): fair share between clients. Set by
# the routes; asyncio tasks inherit it.
client_identity: ContextVar[str | None] = ContextVar("livetrans_client", default=None)


class QueueFullError(RuntimeError):
    """The engine is at capacity (the HTTP layer answers 429)."""


class ServerBusyError(QueueFullError):
    """Queued work already waits longer than the queue-time bound (HTTP 429, ``busy``)."""


class JobCancelledError(RuntimeError):
    """The job was cancelled or superseded before it ran."""


class WorkerStoppedError(RuntimeError):
    """The worker is shutting down and takes no more work."""
