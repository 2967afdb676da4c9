"""Log hygiene helpers: secret query parameters and request ids."""

from __future__ import annotations

import logging

from app.api.http.redaction import SecretQueryFilter, new_request_id, redact, valid_request_id


def test_redact_secret_query_parameters() -> None:
    assert redact("/v1/live?api_key=abc") == "/v1/live?api_key=***"
    assert redact("/w?room=r&token=t0k&lang=de") == "/w?room=r&token=***&lang=de"
    assert redact('"GET /v1/models?API_KEY=s3cr3t HTTP/1.1" 200') == \
        '"GET /v1/models?API_KEY=*** HTTP/1.1" 200'
    assert redact("/v1/live?monkey=banana&x=api_key=1") == "/v1/live?monkey=banana&x=api_key=1"


def test_filter_rewrites_arguments_before_formatting() -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1,
                               '%s - "WebSocket %s" [accepted]',
                               (("127.0.0.1", 5000), "/v1/live?api_key=k"), None)
    assert SecretQueryFilter().filter(record)
    assert record.getMessage() == "('127.0.0.1', 5000) - \"WebSocket /v1/live?api_key=***\" " \
        "[accepted]"


def test_request_ids() -> None:
    assert valid_request_id("trace-1.a_B") and valid_request_id("x" * 64)
    for bad in ("", "x" * 65, "a b", "a\nb", "a\r\nINFO fake", "é", "a/b"):
        assert not valid_request_id(bad)
    new = new_request_id()
    assert valid_request_id(new) and len(new) == 12 and new.isalnum()
