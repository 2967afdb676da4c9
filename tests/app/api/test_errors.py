"""Mapping of failures to OpenAI-shaped errors: typed errors are 4xx, the rest a logged 500."""

from __future__ import annotations

import logging

from app.api.errors import map_engine_error
from app.engine.worker import mark_logged
from app.translation.sessions import SessionBusyError, SessionStoreFullError, StaleUpdateError


def test_conflicts_say_do_not_retry() -> None:
    for exc, code in ((SessionBusyError("busy"), "session_busy"),
                      (StaleUpdateError("old"), "stale_update")):
        err = map_engine_error(exc)
        assert (err.status, err.code) == (409, code)
        assert err.headers == {"x-should-retry": "false"}


def test_a_full_session_store_is_429_with_retry_after() -> None:
    err = map_engine_error(SessionStoreFullError("all 2 sessions are busy"))
    assert (err.status, err.code) == (429, "sessions_full") and err.headers["Retry-After"]


def test_an_unexpected_error_is_a_500_logged_once_with_its_traceback(caplog) -> None:
    def fail() -> None:
        raise ValueError("numpy: seed must be between 0 and 2**128 - 1")

    try:
        fail()
    except ValueError as exc:
        bug = exc
    with caplog.at_level(logging.ERROR, logger="livetrans.api"):
        first = map_engine_error(bug)
        again = map_engine_error(bug)
    assert first.status == again.status == 500 and first.code == "internal_error"
    records = [r for r in caplog.records if r.name == "livetrans.api"]
    assert len(records) == 1 and records[0].exc_info[1] is bug
    assert "fail" in caplog.text  # the traceback, not only the message

    caplog.clear()
    already = RuntimeError("logged by the engine worker")
    mark_logged(already)
    with caplog.at_level(logging.ERROR, logger="livetrans.api"):
        assert map_engine_error(already).status == 500
    assert not caplog.records
