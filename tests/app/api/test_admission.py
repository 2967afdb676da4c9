"""Admission control: beyond --max-live-sessions, or while queued work already waits
longer than --max-queue-wait-s, new live sessions and requests get a clear busy error at
once instead of captions minutes late."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
import websockets

from tests.conftest import LiveServer
from tests.engine_hold import EngineHold

BODY = {"model": "default", "target_lang": "de", "max_tokens": 4,
        "messages": [{"role": "user", "content": "Good morning."}]}


@pytest.fixture(scope="module")
def server():
    with LiveServer(max_live_sessions=2, max_queue_wait_s=0.3) as s:
        yield s


def _ws(server) -> str:
    return server.url.replace("http", "ws") + "/v1/live"


def test_live_sessions_beyond_the_limit_are_refused_with_busy(server) -> None:
    async def main() -> tuple[dict, int | None]:
        async with websockets.connect(_ws(server)) as a, websockets.connect(_ws(server)) as b:
            for ws in (a, b):
                await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
                assert json.loads(await ws.recv())["type"] == "ready"
            async with websockets.connect(_ws(server)) as c:
                frame = json.loads(await c.recv())
                with pytest.raises(websockets.ConnectionClosed):
                    await c.recv()
                return frame, c.close_code

    frame, code = asyncio.run(main())
    assert frame["type"] == "error" and frame["code"] == "busy"
    assert "--max-live-sessions" in frame["message"] and code == 1013


def test_requests_are_refused_while_queued_work_waits_too_long(server) -> None:
    hold = EngineHold(server.app.state.livetrans.backend.worker)
    hold.start()
    gate = hold.gate
    try:
        async def main() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(timeout=60) as client:
                await asyncio.sleep(0.2)  # the engine is held
                waiting = asyncio.create_task(client.post(
                    server.url + "/v1/chat/completions", json=BODY))
                await asyncio.sleep(0.8)  # it has waited longer than the 0.3 s bound
                refused = await client.post(server.url + "/v1/chat/completions", json=BODY)
                gate.set()
                return await waiting, refused

        waited, refused = asyncio.run(main())
    finally:
        gate.set()
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "busy"
    assert "retry-after" in refused.headers
    assert waited.status_code == 200  # admitted work is still served
    metrics = httpx.get(server.url + "/metrics").text
    assert 'livetrans_admission_refusals_total{reason="busy"}' in metrics
    for name in ("livetrans_step_batch_rows_count", "livetrans_step_sequences_count",
                 "livetrans_slot_occupancy", 'livetrans_queue_wait_seconds_count{priority='):
        assert name in metrics, name
    time.sleep(0.1)
    assert httpx.post(server.url + "/v1/chat/completions", json=BODY,
                      timeout=60).status_code == 200
