"""A client that disconnects mid-stream frees the engine at the next forward pass."""

from __future__ import annotations

import gc
import logging
import time

import httpx
import pytest


@pytest.fixture()
def server_errors(caplog):
    """ERROR log lines the server writes during a test (a client leaving is no error: no
    traceback, no "Task exception was never retrieved")."""
    with caplog.at_level(logging.ERROR):
        def errors() -> list[str]:
            time.sleep(0.3)
            gc.collect()  # an unretrieved task exception is reported when it is collected
            time.sleep(0.1)
            return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        yield errors


def test_disconnect_mid_stream_cancels_generation(live_server, server_errors) -> None:
    state = live_server.app.state.livetrans
    engine, worker = state.backend.worker.engine, state.backend.worker
    body = {"model": "default", "stream": True, "max_tokens": 400,
            "messages": [{"role": "user", "content": "Write a very long story about a dragon."}]}
    with httpx.stream("POST", live_server.url + "/v1/chat/completions", json=body,
                      timeout=120) as resp:
        chunks = 0
        for line in resp.iter_lines():
            if line.startswith("data:"):
                chunks += 1
            if chunks >= 5:
                break
        passes_at_disconnect = engine.forward_passes
        cancelled_before = engine.finish_reasons["cancelled"]
        t0 = time.perf_counter()
    # The response is closed here; the server notices and sets the cancel flag.
    deadline = time.monotonic() + 60
    while worker.busy_since is not None and time.monotonic() < deadline:
        time.sleep(0.005)
    freed_ms = (time.perf_counter() - t0) * 1000
    extra = engine.forward_passes - passes_at_disconnect
    print(f"engine freed {freed_ms:.0f} ms after disconnect, {extra} more forward passes")
    assert worker.busy_since is None
    assert engine.finish_reasons["cancelled"] == cancelled_before + 1
    assert extra <= 3  # far from the 400 tokens asked for
    assert server_errors() == []


def test_disconnect_of_a_non_streaming_request_leaves_the_batch(live_server,
                                                               server_errors) -> None:
    """A non-streaming request whose client goes away stops decoding at the next step
    instead of running to its 400 tokens for nobody."""
    import socket

    state = live_server.app.state.livetrans
    engine = state.backend.worker.engine
    cancelled_before = engine.finish_reasons["cancelled"]
    count = ", ".join(str(i) for i in range(1, 30))
    body = ('{"model": "default", "max_tokens": 400, "messages": [{"role": "user", '
            '"content": "Count on: ' + count + ', "}]}').encode()
    sock = socket.create_connection(("127.0.0.1", live_server.port))
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline = time.monotonic() + 30
    while state.backend.worker.busy_since is None and time.monotonic() < deadline:
        time.sleep(0.005)  # the request is decoding
    time.sleep(0.3)
    passes_at_disconnect = engine.forward_passes
    sock.close()
    while engine.finish_reasons["cancelled"] == cancelled_before and \
            time.monotonic() < deadline:
        time.sleep(0.005)
    extra = engine.forward_passes - passes_at_disconnect
    print(f"{extra} forward passes after the client left")
    assert engine.finish_reasons["cancelled"] == cancelled_before + 1
    assert extra <= 10  # polled every 0.1 s: a few steps, far from 400 tokens
    assert server_errors() == []
