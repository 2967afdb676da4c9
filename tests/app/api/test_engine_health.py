"""The scheduler thread's failures as clients see them, on the real model: one injected
exception is counted in /metrics and work goes on; a scheduler that cannot continue turns
/health 503 and ends waiting work with an error naming why, over HTTP and on /v1/live."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest
import websockets

from tests.conftest import LiveServer

BODY = {"model": "default", "target_lang": "de", "max_tokens": 8,
        "messages": [{"role": "user", "content": "Good morning, everyone."}]}
TIMEOUT_S = 120  # generous: the tests wait for an answer, they time nothing


@pytest.fixture()
def server() -> Iterator[LiveServer]:
    """A server of its own: these tests break its scheduler."""
    with LiveServer(queue_size=8) as server:
        yield server


def _chat(server: LiveServer) -> httpx.Response:
    return httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=TIMEOUT_S)


def test_a_failure_in_the_scheduler_loop_is_counted_and_requests_still_complete(server):
    scheduler = server.state.backend.worker.scheduler
    observe, fired = scheduler.on_step, []

    def fail_once(*args) -> None:
        if not fired:
            fired.append(True)
            raise RuntimeError("injected: the step callback failed")
        observe(*args)

    scheduler.on_step = fail_once
    during = _chat(server)  # its first step fails the loop; it is requeued and completes
    after = _chat(server)
    assert fired
    for r in (during, after):
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"].strip()
    metrics = httpx.get(server.url + "/metrics", timeout=TIMEOUT_S).text
    assert 'livetrans_task_restarts_total{task="scheduler"} 1.0' in metrics
    health = httpx.get(server.url + "/health", timeout=TIMEOUT_S)
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_a_broken_scheduler_turns_health_503_and_ends_waiting_work_with_an_error(server):
    scheduler = server.state.backend.worker.scheduler
    scheduler.config.restart_backoff_s = (0.01,)

    def always_fail(*_args) -> None:
        raise RuntimeError("injected: the step callback failed")

    scheduler.on_step = always_fail
    waited = _chat(server)  # in the engine when the scheduler breaks: an error, no hang
    assert waited.status_code == 503, waited.text
    error = waited.json()["error"]
    assert error["code"] == "engine_unavailable" and error["type"] == "service_unavailable"
    assert "failed 2 times in a row (last: RuntimeError: injected" in error["message"]

    health = httpx.get(server.url + "/health", timeout=TIMEOUT_S)
    assert health.status_code == 503 and health.json()["status"] == "error"
    reason = health.json()["error"]
    assert reason.startswith("engine unavailable: the scheduler loop failed") and \
        "\n" not in reason

    refused = _chat(server)  # later work is refused at once, with the same reason
    assert refused.status_code == 503 and refused.json()["error"]["code"] == \
        "engine_unavailable"
    frames = asyncio.run(_live_final(server))
    errors = [m for m in frames if m["type"] == "error"]
    assert [(e["code"], e["segment"], e["final"]) for e in errors] == \
        [("engine_unavailable", 0, True)]


async def _live_final(server: LiveServer) -> list[dict]:
    """One final on ``/v1/live``; every frame until 'done'."""
    url = server.url.replace("http://", "ws://") + "/v1/live"
    frames: list[dict] = []
    async with asyncio.timeout(TIMEOUT_S), websockets.connect(url) as ws:
        await ws.send(json.dumps({"type": "start", "target_lang": "de", "drafters": []}))
        assert json.loads(await ws.recv())["type"] == "ready"
        await ws.send(json.dumps({"type": "final", "segment": 0, "text": "Thank you."}))
        await ws.send(json.dumps({"type": "stop"}))
        async for raw in ws:
            frames.append(json.loads(raw))
            if frames[-1]["type"] == "done":
                break
    return frames
