"""Readiness: before the model is loaded and while shutting down, requests get a 503 in
OpenAI's shape (the SDKs retry it), and /health says which."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.server import create_app
from app.settings import Settings

LOOPBACK = "http://127.0.0.1"  # a name the server answers to (--allowed-hosts)
BODY = {"model": "default", "messages": [{"role": "user", "content": "Hello."}],
        "target_lang": "de"}


def test_requests_before_the_model_is_loaded_get_503_not_ready() -> None:
    # no lifespan: the model never loads
    client = TestClient(create_app(Settings()), base_url=LOOPBACK)
    r = client.post("/v1/chat/completions", json=BODY)
    assert r.status_code == 503 and r.headers["retry-after"] == "2"
    assert r.json()["error"]["code"] == "not_ready"
    assert "still loading" in r.json()["error"]["message"]
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "loading"


def test_a_failed_load_is_named_and_shutting_down_is_its_own_503() -> None:
    app = create_app(Settings())
    state = app.state.livetrans
    state.load_error = "model failed to load: bad file"
    client = TestClient(app, base_url=LOOPBACK)
    r = client.post("/v1/chat/completions", json=BODY)
    assert r.status_code == 503 and "model failed to load: bad file" in \
        r.json()["error"]["message"]
    assert client.get("/health").json()["status"] == "error"
    state.load_error = None
    state.shutting_down = True
    r = client.post("/v1/chat/completions", json=BODY)
    assert r.status_code == 503 and r.json()["error"]["code"] == "shutting_down"
    assert client.get("/health").json()["status"] == "shutting_down"


def test_a_broken_engine_is_a_503_naming_why_and_health_says_error() -> None:
    """No model needed: a backend whose scheduler cannot continue (the real thing is in
    test_engine_health.py); the server reads it through the seam's health view."""
    from types import SimpleNamespace

    from app.translation.backend import BackendHealth

    app = create_app(Settings())
    reason = "the scheduler loop failed 6 times in a row (last: RuntimeError: boom)"
    app.state.livetrans.backend = SimpleNamespace(
        health=lambda: BackendHealth(queue_depth=0, broken=reason))
    client = TestClient(app, base_url=LOOPBACK)
    r = client.post("/v1/chat/completions", json=BODY)
    assert r.status_code == 503 and r.json()["error"]["code"] == "engine_unavailable"
    assert reason in r.json()["error"]["message"] and "retry-after" not in r.headers
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "error"
    assert health.json()["error"] == f"engine unavailable: {reason}"
