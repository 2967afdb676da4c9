"""A real ``livetrans`` server in this process, on a free loopback port (benchmarks, tests).

Benchmarks that compare server configurations (``--parallel 1`` against ``--parallel C``)
start one of these per configuration, in one run, so both sides share the machine's state.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """``with LocalServer(parallel=4) as server: server.url``; settings as keyword args."""

    def __init__(self, **settings: Any) -> None:
        import uvicorn

        from app.server import create_app
        from app.settings import Settings

        self.port = free_port()
        self.settings = Settings(port=self.port, **settings)
        self.app = create_app(self.settings, load_in_background=False)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> Any:
        return self.app.state.livetrans

    def __enter__(self) -> LocalServer:
        self.thread.start()
        deadline = time.monotonic() + 300
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the local server did not start")
            time.sleep(0.05)
        if self.state.load_error:
            raise RuntimeError(self.state.load_error)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
