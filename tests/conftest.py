"""Shared fixtures: the real default model, and a real server on loopback."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def runtime():
    """One real Gemma 3 270M context for all engine tests."""
    from app.engine.runtime import LlamaRuntime, RuntimeConfig
    from app.model_files import default_model_path

    rt = LlamaRuntime(RuntimeConfig(model_path=default_model_path(), n_ctx=4096))
    yield rt
    rt.close()


@pytest.fixture()
def engine(runtime):
    from app.engine.engine import Engine

    runtime.clear()
    return Engine(runtime)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """uvicorn serving ``create_app`` on a free loopback port, in a thread."""

    def __init__(self, **settings) -> None:
        import uvicorn

        from app.server import create_app
        from app.settings import Settings

        self.port = free_port()
        self.settings = Settings(port=self.port, **settings)
        self.app = create_app(self.settings, load_in_background=False)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    with LiveServer(max_source_chars=2000, queue_size=32, max_live_sessions=64) as server:
        yield server


@pytest.fixture(scope="session")
def openai_client(live_server):
    from openai import OpenAI

    return OpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0,
                  timeout=120)
