"""How a failure of the translation path reads to a client: one mapping, for both doors.

``describe_failure`` turns an exception of the translation path into a ``Failure``: the HTTP
status, the error code, the message and its parameter and headers. The HTTP routes raise it
as an OpenAI-shaped error (``app.api.errors.map_engine_error``); the live socket sends its
code and message in an ``error`` frame naming the segment (``app.live.pipeline``).

Only the project's typed errors map to a 4xx or a known 5xx; anything else is a bug: a 500
``internal_error``, logged with its traceback once (the engine worker logs the failures of
its jobs itself and marks them). The errors are the translation backend seam's
(``app.translation.backend``), whichever backend raised them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from app.translation.backend import (
    ContextOverflowError,
    JobCancelledError,
    QueueFullError,
    SchedulerBrokenError,
    ServerBusyError,
    WorkerStoppedError,
    mark_logged,
    was_logged,
)
from app.translation.prompts import UnsupportedLanguageError
from app.translation.sessions import SessionBusyError, SessionStoreFullError, StaleUpdateError

# the API's logger: an unexpected failure was always logged as the API's
log = logging.getLogger("livetrans.api")

# The official SDKs retry a 409 unless told not to; a retried update arrives after newer
# ones and is refused as stale anyway, so a conflict is final.
NO_RETRY = {"x-should-retry": "false"}


@dataclass(frozen=True)
class Failure:
    """A failure as a client hears it: over HTTP the status and headers too."""

    status: int
    message: str
    code: str
    param: str | None = None
    headers: dict[str, str] | None = None


def engine_unavailable(reason: str) -> Failure:
    """The engine's scheduler thread cannot continue (``GET /health`` says why): a 503,
    and no ``Retry-After``, since waiting does not bring it back; a restart does."""
    return Failure(503, f"Engine unavailable: {reason}.", "engine_unavailable")


def internal_error(exc: BaseException, where: str) -> Failure:
    """A 500 for a real bug, logged with its traceback once."""
    if not was_logged(exc):
        log.error("unexpected error in %s", where, exc_info=exc)
        mark_logged(exc)
    return Failure(500, "Internal server error.", "internal_error")


def describe_failure(exc: BaseException) -> Failure:
    """The one mapping of the translation path's failures to what a client is told."""
    if isinstance(exc, SessionBusyError):
        return Failure(409, str(exc), "session_busy", "session_id", dict(NO_RETRY))
    if isinstance(exc, StaleUpdateError):
        return Failure(409, str(exc), "stale_update", "seq", dict(NO_RETRY))
    if isinstance(exc, SessionStoreFullError):
        return Failure(429, f"Server overloaded: {exc}.", "sessions_full", "session_id",
                       {"Retry-After": "1"})
    if isinstance(exc, ServerBusyError):
        return Failure(429, f"Server overloaded, {exc}.", "busy", headers={"Retry-After": "2"})
    if isinstance(exc, QueueFullError):
        return Failure(429, "Server overloaded: too many requests queued; retry shortly.",
                       "queue_full", headers={"Retry-After": "1"})
    if isinstance(exc, ContextOverflowError):
        return Failure(413, f"Input too long: {exc}.", "context_overflow", "messages")
    if isinstance(exc, WorkerStoppedError):
        return Failure(503, "Server is shutting down.", "shutting_down")
    if isinstance(exc, SchedulerBrokenError):
        return engine_unavailable(str(exc))
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return Failure(504, "The request timed out.", "timeout")
    if isinstance(exc, UnsupportedLanguageError):
        return Failure(422, str(exc), "unsupported_language", exc.param)
    if isinstance(exc, JobCancelledError):
        return Failure(499, "Request cancelled.", "cancelled")
    return internal_error(exc, "the translation path")
