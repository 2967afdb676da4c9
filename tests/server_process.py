"""A real ``livetrans serve`` in its own process, for tests that must signal or kill it
(SIGTERM's graceful shutdown, a replica SIGKILLed mid-talk)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from eval.local_server import free_port


@contextmanager
def serve_process(*options: str, env: dict[str, str] | None = None,
                  timeout: float = 180) -> Iterator[tuple[subprocess.Popen, int]]:
    """``livetrans serve --port P OPTIONS...`` once its ``/health`` answers 200; killed
    on the way out if still running."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level",
         "warning", *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
            time.sleep(0.2)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
