"""The translation backend seam's vocabulary: what the layers above the translator name.

The request and the result of one generation, the priority ranks of a job, the errors a
backend raises that ``app.failures`` maps to what a client hears, the per-update timings,
the fair-share client identity, the mark that a failure's traceback is already logged, and
the health view the server reports (``BackendHealth``). ``app.live``, ``app.api`` and
``app.failures`` import these from here (or from ``app.translation.backend``), never from
``app.engine`` (``tests/test_import_layers.py``).

Why re-exported rather than defined here: the llama.cpp engine creates and raises them,
and the engine is the layer below ``app.translation``, which it must not import. So they
are defined in the engine's plain modules (``app.engine.generation``, ``app.engine.jobs``,
``app.engine.sched.errors``, ``app.engine.timings``: dataclasses, exceptions and context
variables, no model, no thread), and this module is the one name the layers above use. A
second backend (CTranslate2, a remote server) raises and fills the same types from here.

Known leak, left as it is: ``GenerationRequest`` carries translator-shaped stops
(``answer_stops``/``answer_begun``: an instruction model's lead-in before its answer;
``stop_on_loop``; ``first_token``: append-only text). The llama.cpp engine implements
them in its text stream and sequence state machine (``app.engine.text_stream``,
``app.engine.sequence``); moving them into the translator would need a per-token stop
callback on the request, a change to the engine's hot loop, not a change of names.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.engine.generation import ContextOverflowError, GenerationRequest, GenerationResult
from app.engine.jobs import (
    PRIORITY_FINAL,
    PRIORITY_NAMES,
    PRIORITY_PARTIAL,
    PRIORITY_REQUEST,
    JobCancelledError,
    QueueFullError,
    ServerBusyError,
    WorkerStoppedError,
    client_identity,
)
from app.engine.sched.errors import SchedulerBrokenError, mark_logged, was_logged
from app.engine.timings import UpdateTimings, current_timings

__all__ = ["PRIORITY_FINAL", "PRIORITY_NAMES", "PRIORITY_PARTIAL", "PRIORITY_REQUEST",
           "BackendHealth", "ContextOverflowError", "GenerationRequest", "GenerationResult",
           "JobCancelledError", "QueueFullError", "SchedulerBrokenError", "ServerBusyError",
           "UpdateTimings", "WorkerStoppedError", "client_identity", "current_timings",
           "mark_logged", "was_logged"]


@dataclass(frozen=True)
class BackendHealth:
    """What ``/health``, ``/metrics`` and readiness read of a backend, at one moment.

    ``queue_depth``: jobs waiting for the model (not yet started); ``broken``: why the
    backend can run no more jobs (its scheduler thread cannot continue; a remote backend
    that lost its server), or None. A broken backend is a 503 ``engine_unavailable``
    until a restart: waiting does not bring it back.
    """

    queue_depth: int = 0
    broken: str | None = None


# Before a backend exists (the model still loading): nothing waits, nothing is broken.
IDLE = BackendHealth()
