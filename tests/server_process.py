"""A real ``livetrans serve`` in its own process, for tests that must signal or kill it
(SIGTERM's graceful shutdown, a replica SIGKILLed mid-talk)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import httpx

from eval.local_server import free_port


@contextmanager
def serve_process(*options: str, env: dict[str, str] | None = None,
                  timeout: float = 180, stderr: IO[bytes] | None = None,
                  ) -> Iterator[tuple[subprocess.Popen, int]]:
    """``livetrans serve --port P OPTIONS...`` once its ``/health`` answers 200; killed
    on the way out if still running. Its log goes to ``stderr`` (a file), else nowhere."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level",
         "warning", *options], stdout=subprocess.DEVNULL,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
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
