"""Secrets and surfaces (issue 12): no key in logs, sane request ids, /health and /metrics
behind keys, CORS that a security review accepts."""

from __future__ import annotations

import asyncio
import logging
import re

import httpx
import pytest
import websockets

from tests.conftest import LiveServer

APP = "https://app.example"


@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=["key-one"], metrics_key="scrape-key",
                    cors_origins=[APP]) as server:
        yield server


@pytest.fixture(scope="module")
def keys_only_server():
    with LiveServer(api_keys=["key-one", "key-two"], cors_origins=["*"]) as server:
        yield server


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture()
def server_logs():
    """Every line uvicorn and livetrans log, at INFO, formatted as a handler sees it."""
    capture = _Capture()
    names = ("uvicorn.access", "uvicorn.error", "livetrans.server")
    saved = {}
    for name in names:
        logger = logging.getLogger(name)
        saved[name] = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(capture)
    yield capture.lines
    for name in names:
        logging.getLogger(name).removeHandler(capture)
        logging.getLogger(name).setLevel(saved[name])


def test_api_keys_in_query_strings_never_reach_the_logs(keyed_server, server_logs) -> None:
    ws_url = keyed_server.url.replace("http://", "ws://")

    async def connect(query: str) -> None:
        try:
            async with websockets.connect(f"{ws_url}/v1/live?{query}") as ws:
                await ws.close()
        except websockets.WebSocketException:
            pass

    asyncio.run(connect("api_key=key-one"))
    asyncio.run(connect("lang=de&api_key=wrong-secret-key"))
    httpx.get(keyed_server.url + "/v1/models?api_key=key-one&x=1")
    httpx.get(keyed_server.url + "/health?token=viewer-secret")
    text = "\n".join(server_logs)
    assert "/v1/live" in text and "/v1/models" in text  # the requests were logged...
    for secret in ("key-one", "wrong-secret-key", "viewer-secret"):
        assert secret not in text  # ...without their keys
    assert "api_key=***" in text


@pytest.mark.parametrize("forged", [
    "abc GET /v1/admin -> 200 (0.1 ms) request_id=admin",  # fake fields
    "x" * 65,
    "id\x7fwith-del",
    "caf\xe9",
])
def test_forged_request_ids_are_replaced(live_server, server_logs, forged: str) -> None:
    r = httpx.get(live_server.url + "/v1/models",
                  headers={"X-Request-ID": forged.encode("latin-1")})
    rid = r.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{12}", rid) and rid != forged
    line = next(ln for ln in server_logs if f"request_id={rid}" in ln)
    assert forged not in line
    ok = httpx.get(live_server.url + "/v1/models", headers={"X-Request-ID": "trace-1.a_B"})
    assert ok.headers["x-request-id"] == "trace-1.a_B"


def test_forged_log_lines_with_newlines_cannot_get_through(live_server) -> None:
    """h11 refuses raw CR/LF in a header, and the id rule refuses what it lets through."""
    from app.api.http.redaction import valid_request_id

    for forged in ("a\nINFO livetrans.server request_id=x GET /", "a\r\nb", "a\x1b[2J"):
        assert not valid_request_id(forged)
    import socket

    with socket.create_connection(("127.0.0.1", live_server.port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"X-Request-ID: a\rINFO forged\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.split(b" ", 2)[1] == b"400"


def test_health_without_a_key_tells_only_the_status(keyed_server) -> None:
    open_health = httpx.get(keyed_server.url + "/health")
    assert open_health.status_code == 200 and open_health.json() == {"status": "ok"}
    for key in ("key-one", "scrape-key"):
        full = httpx.get(keyed_server.url + "/health",
                         headers={"Authorization": f"Bearer {key}"}).json()
        assert full["status"] == "ok" and {"queue_depth", "sessions", "model"} <= set(full)
    wrong = httpx.get(keyed_server.url + "/health", headers={"Authorization": "Bearer nope"})
    assert wrong.json() == {"status": "ok"}


def test_metrics_need_the_metrics_key_when_one_is_set(keyed_server) -> None:
    url = keyed_server.url + "/metrics"
    for headers in ({}, {"Authorization": "Bearer key-one"}, {"Authorization": "Bearer x"}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = httpx.get(url, headers={"Authorization": "Bearer scrape-key"})
    assert r.status_code == 200 and "livetrans_requests_total" in r.text
    # the metrics key is no API key
    assert httpx.get(keyed_server.url + "/v1/models",
                     headers={"Authorization": "Bearer scrape-key"}).status_code == 401


def test_metrics_need_an_api_key_when_keys_are_set(keys_only_server) -> None:
    url = keys_only_server.url + "/metrics"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer key-two"}).status_code == 200
    assert httpx.get(keys_only_server.url + "/health").json() == {"status": "ok"}


def test_metrics_and_health_stay_open_without_keys(live_server) -> None:
    assert httpx.get(live_server.url + "/metrics").status_code == 200
    assert "sessions" in httpx.get(live_server.url + "/health").json()


def _preflight(server, origin: str) -> httpx.Response:
    return httpx.options(server.url + "/v1/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})


def test_cors_is_off_by_default(live_server) -> None:
    r = httpx.get(live_server.url + "/v1/models", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    pre = _preflight(live_server, "https://evil.example")
    assert "access-control-allow-origin" not in pre.headers


def test_cors_allows_exactly_the_configured_origins(keyed_server) -> None:
    pre = _preflight(keyed_server, APP)
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == APP
    assert "access-control-allow-credentials" not in pre.headers
    assert "access-control-allow-origin" not in _preflight(keyed_server,
                                                            "https://evil.example").headers
    r = httpx.get(keyed_server.url + "/v1/models",
                  headers={"Origin": APP, "Authorization": "Bearer key-one"})
    assert r.headers["access-control-allow-origin"] == APP


def test_a_wildcard_origin_never_comes_with_credentials(keys_only_server) -> None:
    r = httpx.get(keys_only_server.url + "/v1/models", headers={
        "Origin": "https://any.example", "Authorization": "Bearer key-one",
        "Cookie": "session=1"})
    assert r.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in r.headers
    pre = _preflight(keys_only_server, "https://any.example")
    assert "access-control-allow-credentials" not in pre.headers
