"""Log lines: JSON for log shippers, with the id of the request being handled."""

from __future__ import annotations

import json
import logging

from asgi_correlation_id import CorrelationIdFilter, correlation_id

from app.logs import JsonFormatter


def _record(message: str) -> logging.LogRecord:
    record = logging.LogRecord("livetrans.test", logging.INFO, __file__, 1, message, (), None)
    CorrelationIdFilter().filter(record)
    return record


def test_json_lines_carry_the_request_id_of_the_request_being_handled() -> None:
    token = correlation_id.set("abc123")
    try:
        line = JsonFormatter().format(_record('quote " and newline\n inside'))
    finally:
        correlation_id.reset(token)
    entry = json.loads(line)
    assert "\n" not in line and entry["request_id"] == "abc123"
    assert entry["level"] == "info" and entry["message"].startswith('quote "')


def test_lines_outside_a_request_have_no_request_id() -> None:
    assert "request_id" not in json.loads(JsonFormatter().format(_record("startup")))


def test_version_flag(capsys) -> None:
    import pytest

    from app.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("livetrans ")


def test_uvicorns_websocket_lines_are_dropped_for_the_servers_own() -> None:
    from app.logs import WebSocketLinesFilter

    keep = WebSocketLinesFilter().filter

    def record(msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, msg, args, None)

    assert not keep(record('%s - "WebSocket %s" [accepted]', "1.2.3.4:5", "/v1/live"))
    assert not keep(record("connection open"))
    assert not keep(record("connection closed"))
    assert keep(record("Started server process [%d]", 1))
