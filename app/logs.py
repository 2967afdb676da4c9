"""Log setup: one format for the server's and uvicorn's lines, text or JSON.

Each HTTP request and each WebSocket connection is logged once (the server's access line;
uvicorn's own access log is off and its WebSocket lines are dropped), and every line logged
while a request is handled carries its request id (set by ``asgi_correlation_id``'s
middleware, attached to records by its ``CorrelationIdFilter``), so a log shipper can join
them (``--log-format json``: one JSON object per line).
"""

from __future__ import annotations

import json
import logging
import time

from asgi_correlation_id import CorrelationIdFilter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "correlation_id", None)
        if rid:
            entry["request_id"] = rid
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


# uvicorn's and the websockets library's own lines about a WebSocket (their templates);
# app.api.http.ws_access_log writes one line per connection instead
_WEBSOCKET_LINES = ('%s - "WebSocket %s" [accepted]', '%s - "WebSocket %s" 403',
                    '%s - "WebSocket %s" %d', "connection open", "connection closed")


class WebSocketLinesFilter(logging.Filter):
    """Drops uvicorn's WebSocket lines (the server writes its own access line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _WEBSOCKET_LINES


# uvicorn's lines that read as "ready" while the model still loads
_READY_LOOKING_LINES = ("Uvicorn running on", "Application startup complete.")


class RunningLineFilter(logging.Filter):
    """Drops uvicorn's "Uvicorn running on ..." and "Application startup complete." lines:
    they come while the model still loads, so a user would take them for the start of
    service. ``serve`` logs where it listens instead, and its ``ready: serving ...`` line
    when requests are served (``app.startup_log``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_READY_LOOKING_LINES)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Root logging for ``livetrans serve`` (uvicorn's loggers propagate to it)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(CorrelationIdFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    uvicorn_error = logging.getLogger("uvicorn.error")
    for kind in (WebSocketLinesFilter, RunningLineFilter):
        if not any(isinstance(f, kind) for f in uvicorn_error.filters):
            uvicorn_error.addFilter(kind())
