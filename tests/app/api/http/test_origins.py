"""``origin_allowed``: the CORS rule, for the WebSocket routes that browsers do not guard."""

from __future__ import annotations

import pytest
from starlette.requests import HTTPConnection

from app.api.http.origins import cors_options, origin_allowed
from app.settings import Settings


def _conn(origin: str | None, host: str = "127.0.0.1:8000") -> HTTPConnection:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return HTTPConnection({"type": "websocket", "headers": headers, "path": "/v1/live"})


@pytest.mark.parametrize("origin, host, allowed", [
    (None, "127.0.0.1:8000", True),  # not a browser
    ("http://127.0.0.1:8000", "127.0.0.1:8000", True),  # the server's own /live page
    ("https://captions.example", "captions.example", True),  # default port implied
    ("HTTPS://Captions.Example", "captions.example:443", True),
    ("http://127.0.0.1:8001", "127.0.0.1:8000", False),
    ("https://evil.example", "127.0.0.1:8000", False),
    ("null", "127.0.0.1:8000", False),  # a file:// or sandboxed page
    ("http://127.0.0.1:99999", "127.0.0.1:99999", False),  # malformed port
    ("", "127.0.0.1:8000", False),
])
def test_default_is_same_origin_only(origin, host, allowed) -> None:
    assert origin_allowed(_conn(origin, host), Settings()) is allowed


def test_configured_origins_and_wildcard() -> None:
    app = Settings(cors_origins=["https://app.example/", "http://localhost:3000"])
    assert app.http.cors_origins == ["https://app.example", "http://localhost:3000"]
    assert origin_allowed(_conn("https://app.example"), app)
    assert origin_allowed(_conn("https://app.example:443"), app)
    assert origin_allowed(_conn("http://localhost:3000"), app)
    assert not origin_allowed(_conn("http://localhost:3001"), app)
    assert not origin_allowed(_conn("https://app.example.evil.example"), app)
    assert origin_allowed(_conn("https://anything.example"), Settings(cors_origins=["*"]))


def test_cors_never_allows_credentials() -> None:
    for origins in ([], ["*"], ["https://app.example"]):
        opts = cors_options(Settings(cors_origins=origins))
        assert opts["allow_credentials"] is False and opts["allow_origins"] == origins
