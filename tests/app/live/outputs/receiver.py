"""A local HTTP receiver for pushes: records every request, answers as a test scripts it.

It runs on a thread of its own (``ThreadingHTTPServer``), so the server under test (in the
test's event loop, or the in-process ``LiveServer``) talks to it over real sockets. It can
be slow (``delay_s``), fail (``statuses``: answered in order, then ``status``), hang
(``hang``: hold each request until ``release`` or ``close``, then drop it), hold each
request until the test opens its ``gate`` (then answer it as usual), redirect, or answer
with a huge body.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []  # answered 2xx
        self.seen: list[tuple[int, Received]] = []  # every answered request, its status
        self.arrived = threading.Condition()
        self.statuses: list[int] = []  # answered first, one per request
        self.status = 200
        self.delay_s = 0.0
        self.hang = False
        self.release = threading.Event()
        self.gate = threading.Event()  # cleared: requests wait for it before answering
        self.gate.set()
        self.redirect_to: str | None = None
        self.big_body = 0
        self.hits = 0  # requests begun (a hung one is counted before it is answered)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver.arrived:
                    receiver.hits += 1
                if receiver.hang:
                    receiver.release.wait(60)
                    return
                receiver.gate.wait(60)
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                parts = urlsplit(self.path)
                with receiver.arrived:
                    status = receiver.statuses.pop(0) if receiver.statuses else receiver.status
                    got = Received(parts.path, parse_qs(parts.query),
                                   dict(self.headers.items()), body, time.monotonic())
                    receiver.seen.append((status, got))
                    if 200 <= status < 300 and receiver.redirect_to is None:
                        receiver.requests.append(got)
                    receiver.arrived.notify_all()
                if receiver.redirect_to is not None:
                    self.send_response(302)
                    self.send_header("Location", receiver.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                payload = b"x" * receiver.big_body if receiver.big_body else b"ok"
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client stopped reading (bounded response): fine

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait_for(self, n: int, timeout: float = 60) -> list[Received]:
        """The first ``n`` requests answered 2xx (a bound against hanging, not a timing)."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.requests)} of {n} requests arrived")
                self.arrived.wait(left)
            return list(self.requests)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.release.set()
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()
