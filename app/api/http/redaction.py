"""What may reach the logs: no secrets, no client-made log lines.

* A browser cannot set headers on a WebSocket, so keys also come as ``?api_key=`` (and
  viewer tokens as ``?token=``); uvicorn logs the full URL of every request and WebSocket.
  ``SecretQueryFilter`` replaces those values with ``***`` before a record is formatted.
* ``X-Request-ID`` is echoed into our request log; a client-chosen value with a newline in
  it would forge log lines. ``valid_request_id`` admits only a well-formed one (the
  server's ``CorrelationIdMiddleware`` replaces any other).
"""

from __future__ import annotations

import logging
import re
import uuid

SECRET_PARAMS = ("api_key", "token", "key")
_SECRET_QUERY = re.compile(r"([?&;](?:" + "|".join(SECRET_PARAMS) + r")=)[^&;#\s\"']*",
                           re.IGNORECASE)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
UVICORN_LOGGERS = ("uvicorn.access", "uvicorn.error")


def redact(text: str) -> str:
    """``text`` with the values of secret query parameters replaced by ``***``."""
    return _SECRET_QUERY.sub(r"\1***", text)


def valid_request_id(value: str) -> bool:
    """A client's request id is kept if it is 1-64 of ``A-Z a-z 0-9 . _ -`` (nothing that
    could end or forge a log line); any other is replaced by ``new_request_id()``."""
    return _REQUEST_ID.fullmatch(value) is not None


def new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class SecretQueryFilter(logging.Filter):
    """Redacts secret query parameters in a record's message and string arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v
                           for k, v in record.args.items()}
        return True


def install_log_redaction(names: tuple[str, ...] = UVICORN_LOGGERS) -> None:
    """Add one ``SecretQueryFilter`` to each named logger (idempotent).

    Filters live on the loggers, which uvicorn's logging setup keeps (it replaces handlers,
    not filters), so this can run before or after ``uvicorn.Config``.
    """
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretQueryFilter) for f in logger.filters):
            logger.addFilter(SecretQueryFilter())
