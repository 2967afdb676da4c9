"""``livetrans serve`` says what it is doing and when it is ready, and every model-backed
route agrees with ``/health`` while the model loads (503, OpenAI's error shape,
Retry-After). The end-to-end case runs ``livetrans serve`` as a user would and reads its
log; nothing is timed."""

from __future__ import annotations

import logging
import os
import subprocess
import threading

import httpx
import pytest
from fastapi.testclient import TestClient

from app.server import create_app
from app.settings import Settings
from app.startup_log import ReadyLine, describe_served, listen_url, progress
from tests.app.test_cli import LIVETRANS, _one_line_error
from tests.conftest import SAMPLES, free_port

LOOPBACK = "http://127.0.0.1"


def test_models_routes_answer_503_like_health_while_loading() -> None:
    client = TestClient(create_app(Settings()), base_url=LOOPBACK)  # no lifespan: no model
    for path in ("/v1/models", "/v1/models/default", "/v1/models/no-such-model"):
        r = client.get(path)
        assert r.status_code == 503, path
        assert r.headers["retry-after"] == "2"
        error = r.json()["error"]
        assert error["code"] == "not_ready" and error["type"] == "service_unavailable"
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "loading"
    assert health.headers["retry-after"] == "2"


def test_the_live_socket_refuses_while_loading_too() -> None:
    client = TestClient(create_app(Settings()), base_url=LOOPBACK)  # no lifespan: no model
    with client.websocket_connect("ws://127.0.0.1/v1/live") as ws:
        frame = ws.receive_json()
    assert frame["type"] == "error" and frame["code"] == "not_ready"


def test_a_failed_load_is_not_worth_a_retry_on_health() -> None:
    app = create_app(Settings())
    app.state.livetrans.load_error = "model failed to load: bad file"
    client = TestClient(app, base_url=LOOPBACK)
    health = client.get("/health")
    assert health.status_code == 503 and "retry-after" not in health.headers
    assert "bad file" in client.get("/v1/models").json()["error"]["message"]


def _records(logger_name: str) -> tuple[logging.Logger, list[str]]:
    logger = logging.getLogger(logger_name)
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, lines


@pytest.mark.parametrize("first", ["listening", "loaded"])
def test_the_ready_line_comes_once_whichever_half_is_last(first) -> None:
    logger, lines = _records(f"test.ready.{first}")
    ready = ReadyLine(logger)
    calls = {"listening": lambda: ready.listening("http://127.0.0.1:8000"),
             "loaded": lambda: ready.loaded("languages en,de, model m, prompt format x")}
    second = "loaded" if first == "listening" else "listening"
    calls[first]()
    assert not ready.said
    calls[second]()
    calls[second]()  # a second call says nothing more
    said = [line for line in lines if line.startswith("ready:")]
    assert said == ["ready: serving http://127.0.0.1:8000 (languages en,de, model m, "
                    "prompt format x)"]
    # listening while the model loads says so, once
    assert sum("not serving yet" in line for line in lines) == (first == "listening")


def test_progress_says_it_is_still_working() -> None:
    logger, lines = _records("test.progress")
    beat = threading.Event()
    logger.addHandler(type("Signal", (logging.Handler,), {
        "emit": lambda self, record: beat.set() if "still" in record.getMessage() else None,
    })())
    with progress("loading the model m", every_s=0.01, logger=logger):
        assert beat.wait(60)
    assert lines[0] == "loading the model m"
    assert lines[1].startswith("still loading the model m (")


def test_describe_served() -> None:
    assert describe_served(["en", "de"], "m", "few-shot") == \
        "languages en,de, model m, prompt format few-shot"
    assert describe_served(frozenset({"en", "de"}), "m", "gemma") == \
        "languages de,en, model m, prompt format gemma"
    assert describe_served(None, "m", "x", supported=["en", "de"]).startswith(
        "languages any supported (de,en)")
    assert listen_url("::1", 8000) == "http://[::1]:8000"


def test_serve_says_what_it_does_and_exactly_once_when_it_is_ready(tmp_path) -> None:
    """The real server, as a user starts it: a line at once, progress, no uvicorn "running
    on" line, and one ready line after which /v1/models answers; before it, 503."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIVETRANS_")}
    env.update(LIVETRANS_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([LIVETRANS, "serve", "--port", str(port), "--langs", "en,de",
                             "--no-trim"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True, env=env)
    lines: list[str] = []
    answers_before_ready: list[int] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if "ready: serving" in line:
                break
            if "listening on" in line or "still " in line:
                answers_before_ready.append(
                    httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30).status_code)
        assert any("ready: serving" in line for line in lines), lines[-20:]
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30)
        assert models.status_code == 200 and models.json()["data"]
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=60)
    lines += (rest or "").splitlines()
    text = "\n".join(lines)
    assert "starting livetrans" in lines[0] and "gemma-3-270m" in lines[0], lines[0]
    assert "--no-trim" in lines[0]
    assert "Uvicorn running on" not in text and "Application startup complete" not in text
    order = [next(i for i, line in enumerate(lines) if marker in line) for marker in (
        "starting livetrans", "preparing gemma-3-270m", "loading the model", "ready: serving")]
    assert order == sorted(order), text
    ready = [line for line in lines if "ready: serving" in line]
    assert len(ready) == 1, ready
    assert f"ready: serving http://127.0.0.1:{port} (languages en,de, model " in ready[0]
    assert ", prompt format " in ready[0]
    assert answers_before_ready and set(answers_before_ready) == {503}, answers_before_ready


def test_load_test_says_a_loading_server_is_loading(tmp_path) -> None:
    """``livetrans load-test`` against a server whose model is loading: one line that says
    so (not "is --server a livetrans server?"), exit code 2. The app runs without its
    lifespan, so its model never loads."""
    import time

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(Settings()), host="127.0.0.1",
                                           port=port, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        proc = subprocess.run(
            [LIVETRANS, "load-test", "--server", f"http://127.0.0.1:{port}", "--asr-file",
             str(SAMPLES / "asr_sample_en.jsonl")], capture_output=True, text=True,
            timeout=120, env={k: v for k, v in os.environ.items()
                              if not k.startswith("LIVETRANS_")})
    finally:
        server.should_exit = True
        thread.join(30)
    _one_line_error(proc, "is still loading its model", "'ready:' line")
