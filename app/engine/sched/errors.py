"""The step scheduler's errors, and the mark that says a failure's traceback is logged."""

from __future__ import annotations

_REASON_CHARS = 300  # a failure's message in ``broken`` (one line for /health)


class GenerationFailedError(RuntimeError):
    """One generation could not be admitted or handed back; its job fails, no other."""


class SchedulerBrokenError(RuntimeError):
    """The scheduler thread cannot continue: every waiting and later job ends with this."""


_LOGGED = "__livetrans_logged__"


def mark_logged(exc: BaseException) -> None:
    """Remember that ``exc``'s traceback is in the log (the engine worker and the HTTP
    layer then skip it: one failure, one traceback)."""
    try:
        setattr(exc, _LOGGED, True)
    except AttributeError:  # an exception type without a __dict__
        pass


def was_logged(exc: BaseException) -> bool:
    return bool(getattr(exc, _LOGGED, False))


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, bounded (for ``broken`` and error messages)."""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


def job_error(step: str, exc: BaseException) -> GenerationFailedError:
    """What the job of a generation that failed in ``step`` raises (already logged)."""
    error = GenerationFailedError(f"{step} failed: {describe(exc)}")
    error.__cause__ = exc
    mark_logged(error)
    return error
