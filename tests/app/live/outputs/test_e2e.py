"""Pushes through the real server: a speaker's ``outputs`` on ``WebSocket /v1/live``.

A real ``LiveServer`` (the real model) that allows pushes to loopback only, a real
WebSocket client, and local HTTP receivers (``tests.app.live.outputs.receiver``) that check
YouTube's lines and the webhooks' signatures, including receivers that fail or hang while
the captions go on. Waits are bounds against hanging, never timings.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import websockets

from app.live.outputs.webhook import verify
from app.live.outputs.youtube import caption_text
from tests.app.live.outputs.receiver import Receiver
from tests.conftest import LiveServer

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")
SOURCES = ["Good morning.", "Thank you very much."]


@pytest.fixture(scope="module")
def push_server() -> Iterator[LiveServer]:
    with LiveServer(max_source_chars=2000, max_live_sessions=8,
                    output_allow_hosts=["127.0.0.1"], output_timeout_s=1.0,
                    output_retry_s=2.0) as server:
        yield server


def _ws_url(server: LiveServer) -> str:
    return server.url.replace("http://", "ws://") + "/v1/live"


async def _until_done(ws: Any, limit: float = 300) -> list[dict]:
    out = []
    async with asyncio.timeout(limit):
        async for raw in ws:
            msg = json.loads(raw)
            out.append(msg)
            if msg["type"] == "done":
                break
    return out


def _talk(server: LiveServer, start: dict, sources: list[str]) -> tuple[dict, list[dict]]:
    """One speaker: ``start`` (must be ready), a final per source, ``stop``; returns the
    ``ready`` frame and every frame up to ``done``."""
    async def main() -> tuple[dict, list[dict]]:
        async with websockets.connect(_ws_url(server), max_size=None) as ws:
            await ws.send(json.dumps(start))
            ready = json.loads(await ws.recv())
            assert ready["type"] == "ready", ready
            for seg, text in enumerate(sources):
                await ws.send(json.dumps({"type": "final", "segment": seg, "text": text}))
            await ws.send(json.dumps({"type": "stop"}))
            return ready, await _until_done(ws)
    return asyncio.run(main())


def _metric(server: LiveServer, name: str, **labels: str) -> float:
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{") and line.split("}")[0].split("{")[1] == want:
            return float(line.rsplit(" ", 1)[1])
        if not labels and line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _until(check, limit: float = 60) -> None:  # noqa: ANN001
    async def wait() -> None:
        async with asyncio.timeout(limit):
            while not check():
                await asyncio.sleep(0.05)
    asyncio.run(wait())


def test_youtube_lines_and_signed_webhooks_for_every_final(push_server) -> None:
    with Receiver() as yt, Receiver() as hook:
        start = {"type": "start", "target_lang": "de", "room": "push-e2e-1", "drafters": [],
                 "outputs": [
                     {"type": "youtube", "url": yt.url + "/closedcaption?cid=KEY-1"},
                     {"type": "webhook", "url": hook.url + "/in", "lang": "de",
                      "secret": "s3cret"}]}
        ready, frames = _talk(push_server, start, SOURCES)
        finals = [f for f in frames if f["type"] == "caption" and f["final"]]
        assert [f["segment"] for f in finals] == [0, 1]
        posts, hooks = yt.wait_for(2), hook.wait_for(2)

    assert [p.query["seq"] for p in posts] == [["1"], ["2"]]
    assert all(p.query["cid"] == ["KEY-1"] for p in posts)
    for post, final in zip(posts, finals, strict=True):
        assert post.headers["Content-Type"] == "text/plain"
        stamp, text, end = post.body.decode("utf-8").split("\n")
        assert STAMP.match(stamp) and text == caption_text(final["text"]) and end == ""
    for got, final in zip(hooks, finals, strict=True):
        assert verify("s3cret", got.body, got.headers["X-Livetrans-Signature"])
        body = json.loads(got.body)
        assert {k: body[k] for k in ("room", "talk", "lang", "segment", "source", "text")} \
            == {"room": "push-e2e-1", "talk": ready["talk"], "lang": "de",
                "segment": final["segment"], "source": final["source"],
                "text": final["text"]}
        assert 0 <= body["start"] <= body["end"]
    # each final caption's stats count its language's pushes so far (no URL, no secret)
    stats = finals[-1]["stats"]["outputs"]
    assert [(s["output"], s["type"]) for s in stats] == [(0, "youtube"), (1, "webhook")]
    assert all(set(s) == {"output", "type", "delivered", "failed", "dropped", "retries",
                          "pending"} for s in stats)
    assert "KEY-1" not in json.dumps(frames) and "s3cret" not in json.dumps(frames)
    _until(lambda: _metric(push_server, "livetrans_output_finals_total",
                           type="webhook", outcome="delivered") >= 2)
    assert _metric(push_server, "livetrans_output_finals_total", type="youtube",
                   outcome="delivered") >= 2


@pytest.mark.parametrize(("outputs", "param", "code"), [
    ([{"type": "webhook", "url": "ftp://127.0.0.1/x", "secret": "s"}], "outputs[0].url",
     "invalid_message"),
    ([{"type": "youtube", "url": "http://127.0.0.1/a"}] * 5, "outputs", "invalid_message"),
    ([{"type": "youtube", "url": "http://127.0.0.1/a"},
      {"type": "webhook", "url": "https://example.com/hook", "secret": "s"}],
     "outputs[1].url", "output_not_allowed"),
    ([{"type": "webhook", "url": "http://localhost/hook", "secret": "s"}],
     "outputs[0].url", "output_not_allowed"),
    ([{"type": "webhook", "url": "http://10.0.0.1/hook", "secret": "s"}],
     "outputs[0].url", "output_not_allowed"),
    ([{"type": "webhook", "url": "http://127.0.0.1/hook", "secret": 12345}],
     "outputs[0].secret", "invalid_message"),
    ([{"type": "youtube", "url": "http://127.0.0.1/a", "lang": "ja"}], "outputs[0].lang",
     "invalid_message"),
])
def test_bad_outputs_get_one_error_frame_naming_the_field(push_server, outputs, param,
                                                          code) -> None:
    async def main() -> list[dict]:
        async with websockets.connect(_ws_url(push_server)) as ws:
            base = {"type": "start", "target_lang": "de", "room": "push-e2e-bad",
                    "drafters": []}
            await ws.send(json.dumps({**base, "outputs": outputs}))
            refused = json.loads(await ws.recv())
            await ws.send(json.dumps(base))  # corrected, on the same socket
            ready = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "stop"}))
            return [refused, ready, *await _until_done(ws)]

    refused, ready, *rest = asyncio.run(main())
    assert refused["type"] == "error"
    assert (refused["code"], refused["param"]) == (code, param)
    assert refused["message"].startswith(param)
    assert ready["type"] == "ready" and rest[-1]["type"] == "done"


def test_failing_and_hanging_receivers_delay_no_caption(push_server) -> None:
    failed_before = _metric(push_server, "livetrans_output_finals_total", type="webhook",
                            outcome="failed")
    with Receiver() as hung, Receiver() as broken, Receiver() as fine:
        hung.hang = True
        broken.status = 500
        start = {"type": "start", "target_langs": ["de", "ja"], "room": "push-e2e-2",
                 "drafters": [], "outputs": [
                     {"type": "webhook", "url": hung.url + "/h", "lang": "de",
                      "secret": "a"},
                     {"type": "webhook", "url": broken.url + "/b", "lang": "de",
                      "secret": "b"},
                     {"type": "youtube", "url": fine.url + "/closedcaption?cid=K",
                      "lang": "ja"}]}
        _, frames = _talk(push_server, start, SOURCES)
        finals = [f for f in frames if f["type"] == "caption" and f["final"]]
        assert sorted((f["segment"], f["lang"]) for f in finals) == \
            [(0, "de"), (0, "ja"), (1, "de"), (1, "ja")]
        assert not [f for f in frames if f["type"] == "error"]
        assert len(fine.wait_for(2)) == 2  # the healthy output is not held up either
        assert hung.hits >= 1 and not hung.requests and not broken.requests
        # the failing and hanging ones give up within --output-retry-s, counted
        _until(lambda: _metric(push_server, "livetrans_output_finals_total",
                               type="webhook", outcome="failed") >= failed_before + 4)
    de = [f for f in finals if f["lang"] == "de"]
    assert [s["output"] for s in de[-1]["stats"]["outputs"]] == [0, 1]
    ja = [f for f in finals if f["lang"] == "ja"]
    assert [s["output"] for s in ja[-1]["stats"]["outputs"]] == [2]


def test_a_server_without_httpx_refuses_outputs_and_keeps_the_socket(push_server,
                                                                     monkeypatch) -> None:
    """The Docker image's core dependencies may lack httpx: then ``outputs`` is one error
    frame (the room is not held), and a ``start`` without them works."""
    monkeypatch.setitem(sys.modules, "app.live.outputs.delivery", None)  # import fails

    async def main() -> tuple[dict, dict]:
        async with websockets.connect(_ws_url(push_server)) as ws:
            base = {"type": "start", "target_lang": "de", "room": "push-e2e-3"}
            await ws.send(json.dumps({**base, "outputs": [
                {"type": "youtube", "url": "http://127.0.0.1:9/closedcaption"}]}))
            refused = json.loads(await ws.recv())
            await ws.send(json.dumps(base))
            ready = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "stop"}))
            await _until_done(ws)
            return refused, ready

    refused, ready = asyncio.run(main())
    assert (refused["code"], refused["param"]) == ("outputs_unavailable", "outputs")
    assert ready["type"] == "ready" and ready["room"] == "push-e2e-3"


def test_a_name_resolving_to_loopback_is_refused_when_connecting() -> None:
    """``*`` lets ``localhost`` through at ``start`` (a name), but it resolves to a loopback
    address, which no entry names: the server never connects, and the final fails."""
    with LiveServer(max_source_chars=2000, max_live_sessions=4, output_allow_hosts=["*"],
                    output_timeout_s=1.0, output_retry_s=1.0) as server, \
            Receiver() as rx:
        port = rx.server.server_address[1]
        start = {"type": "start", "target_lang": "de", "room": "push-e2e-4", "drafters": [],
                 "outputs": [{"type": "webhook", "url": f"http://localhost:{port}/h",
                              "secret": "s"}]}
        _, frames = _talk(server, start, SOURCES[:1])
        assert [f["segment"] for f in frames if f["type"] == "caption" and f["final"]] == [0]
        _until(lambda: _metric(server, "livetrans_output_finals_total", type="webhook",
                               outcome="failed") >= 1)
        assert rx.hits == 0
        assert _metric(server, "livetrans_output_retries_total", type="webhook") == 0
