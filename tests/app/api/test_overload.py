"""Overload answers 429 (retry later), never a 5xx: a full queue, and a request that waited
in the queue for the whole request timeout."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from tests.conftest import LiveServer
from tests.engine_hold import EngineHold

BODY = {"model": "default", "target_lang": "de",
        "messages": [{"role": "user", "content": "Good morning."}]}


@pytest.fixture(scope="module")
def small_server():
    with LiveServer(queue_size=1, request_timeout_s=3.0) as server:
        yield server


def _block(server) -> threading.Event:
    """Holds the engine (in one pass) until the returned event is set (at most 60 s)."""
    hold = EngineHold(server.app.state.livetrans.backend.worker)
    hold.start()
    return hold.gate


def test_queue_timeout_and_queue_full_are_429(small_server) -> None:
    gate = _block(small_server)
    try:
        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                await asyncio.sleep(0.2)  # the blocker is running
                first = asyncio.create_task(client.post(
                    small_server.url + "/v1/chat/completions", json=BODY))
                await asyncio.sleep(0.2)  # the first request now waits in the queue (1 slot)
                second = await client.post(small_server.url + "/v1/chat/completions",
                                           json=BODY)
                return [await first, second]

        waited, rejected = asyncio.run(main())  # the first waits 3 s, longer than allowed
    finally:
        gate.set()
    assert rejected.status_code == 429 and rejected.json()["error"]["code"] == "queue_full"
    assert waited.status_code == 429 and waited.json()["error"]["code"] == "queue_timeout"
    assert "retry-after" in waited.headers
    # and the server is fine afterwards
    ok = httpx.post(small_server.url + "/v1/chat/completions", json={**BODY, "max_tokens": 2},
                    timeout=60)
    assert ok.status_code == 200
