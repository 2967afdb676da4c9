"""Backpressure never costs a speaker's ``WebSocket /v1/live`` connection (issue 28, item 9).

The server's WebSocket keepalive reads the client's pong with the data, behind every frame
the client sent before it: a reader that stops reading for longer than the ping timeout
while it waits for room used to have the connection killed (1011) with accepted finals
unanswered. Here the server pings every 0.3 s and gives up 2 s after a ping, so a socket
left unread too long dies within seconds; each test floods the real server with the real
model and a real ``websockets`` client for several ping timeouts, then checks that the
connection was never dropped and that every final got its captions or an error frame
naming its segment, and ``done`` after ``stop``.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import websockets

from tests.engine_hold import EngineHold
from tests.speech import SENTENCES, needs_espeak, talk

LANGS = ["de", "fr", "es", "ja", "zh"]
START = {"type": "start", "target_langs": LANGS, "drafters": []}
PING_INTERVAL_S, PING_TIMEOUT_S = 0.3, 2.0
SENTENCE = ("The committee will publish its final report on the new railway line next "
            "spring, after the last public hearing in the northern districts")


def _url(server: Any) -> str:
    return server.url.replace("http://", "ws://") + "/v1/live"


@pytest.fixture()
def keepalive(live_server, monkeypatch) -> Iterator[Any]:
    """The shared server with a short keepalive (uvicorn reads these per connection)."""
    config = live_server.server.config
    monkeypatch.setattr(config, "ws_ping_interval", PING_INTERVAL_S)
    monkeypatch.setattr(config, "ws_ping_timeout", PING_TIMEOUT_S)
    yield live_server


def _set_limits(server: Any, monkeypatch, **limits: Any) -> None:
    from app.live.limits import LiveLimits

    monkeypatch.setattr(server.app.state.livetrans, "live_limits", LiveLimits(**limits),
                        raising=False)


async def _read_all(ws: Any, into: list[dict]) -> None:
    """Every frame until the server closes (a close before 'done' is the test's failure)."""
    try:
        async for raw in ws:
            into.append(json.loads(raw))
    except websockets.ConnectionClosed:
        pass


def _final(segment: int) -> str:
    return json.dumps({"type": "final", "segment": segment,
                       "text": f"{SENTENCE}, item {segment}."})


def _answers(msgs: list[dict]) -> dict[int, Counter]:
    """Per segment: final captions per language, and error frames (``"*"``: every
    language)."""
    out: dict[int, Counter] = {}
    for m in msgs:
        if m["type"] == "caption" and m["final"]:
            out.setdefault(m["segment"], Counter())[m["lang"]] += 1
        elif m["type"] == "error" and m.get("segment") is not None:
            out.setdefault(m["segment"], Counter())[m.get("lang", "*")] += 1
    return out


def _assert_every_final_answered_once(sent: list[int], msgs: list[dict]) -> None:
    answers = _answers(msgs)
    assert sorted(answers) == sent
    for segment in sent:
        got = answers[segment]
        assert got == Counter({"*": 1}) or got == Counter(dict.fromkeys(LANGS, 1)), \
            (segment, got)


def test_finals_that_outrun_the_engine_never_cost_the_connection(keepalive,
                                                                 monkeypatch) -> None:
    """Long finals into five languages, in bursts far beyond what the engine translates,
    for several ping timeouts: the socket stays open, each final is captioned in every
    language or refused by name (``too_many_pending``), and 'stop' still ends in 'done'."""
    _set_limits(keepalive, monkeypatch, max_pending_finals=2, backpressure_s=0.3)

    async def main() -> tuple[list[int], list[dict], int | None]:
        msgs: list[dict] = []
        sent: list[int] = []
        async with websockets.connect(_url(keepalive), max_size=None) as ws:
            await ws.send(json.dumps(START))
            assert json.loads(await ws.recv())["type"] == "ready"
            reader = asyncio.create_task(_read_all(ws, msgs))
            for _ in range(12):  # 6 s: three ping timeouts, then the engine's tail
                for _ in range(40):
                    sent.append(len(sent))
                    await ws.send(_final(sent[-1]))
                await asyncio.sleep(0.5)
            await ws.send(json.dumps({"type": "stop"}))
            async with asyncio.timeout(600):
                await reader
            return sent, msgs, ws.close_code

    sent, msgs, code = asyncio.run(main())
    assert code == 1000 and msgs[-1] == {"type": "done"}
    _assert_every_final_answered_once(sent, msgs)
    codes = Counter(m["code"] for m in msgs if m["type"] == "error")
    assert set(codes) == {"too_many_pending"}
    assert any(m["type"] == "caption" and m["final"] for m in msgs)


@needs_espeak
def test_speech_faster_than_real_time_is_throttled_without_closing(keepalive, monkeypatch,
                                                                   tmp_path) -> None:
    """A speaker streaming speech at eight times real time into a 1 s backlog, for
    several ping timeouts: the reader pushes back, drops what still finds no room (one
    ``audio_overrun`` per episode, never unbounded memory), and the socket stays open to
    'done'."""
    _set_limits(keepalive, monkeypatch, max_audio_backlog_s=1.0, backpressure_s=0.3)
    audio, rate = talk(tmp_path, SENTENCES, pause_s=0.5)
    step = rate // 4
    frames = [audio[i:i + step].astype("<i2").tobytes() for i in range(0, len(audio), step)]

    async def main() -> tuple[list[dict], int | None]:
        msgs: list[dict] = []
        async with websockets.connect(_url(keepalive), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "input": "audio",
                                      "sample_rate": rate}))
            assert json.loads(await ws.recv())["type"] == "ready"
            reader = asyncio.create_task(_read_all(ws, msgs))
            for _ in range(6):  # 40 s of speech in 5 s, then the recogniser's tail
                for frame in frames:
                    await ws.send(frame)
                    await asyncio.sleep(0.25 / 8)
            await ws.send(json.dumps({"type": "stop"}))
            async with asyncio.timeout(600):
                await reader
            return msgs, ws.close_code

    msgs, code = asyncio.run(main())
    assert code == 1000 and msgs[-1] == {"type": "done"}
    assert {m["code"] for m in msgs if m["type"] == "error"} <= {"audio_overrun"}


def test_shutdown_answers_every_accepted_final_before_it_closes() -> None:
    """Shutdown with finals queued behind a held engine: when the grace is nearly over
    the connection stops translating, names every final left in a ``shutting_down`` error
    frame, says 'done' and closes (1001) before the server would close it unanswered."""
    from tests.conftest import LiveServer

    with LiveServer(shutdown_grace_s=2, live_max_pending_finals=64) as server:
        config = server.server.config
        config.ws_ping_interval, config.ws_ping_timeout = PING_INTERVAL_S, PING_TIMEOUT_S
        loop = server.server.servers[0].get_loop()
        hold = EngineHold(server.state.backend.worker)

        async def main() -> tuple[list[int], list[dict], int | None]:
            msgs: list[dict] = []
            async with websockets.connect(_url(server), max_size=None) as ws:
                await ws.send(json.dumps(START))
                assert json.loads(await ws.recv())["type"] == "ready"
                reader = asyncio.create_task(_read_all(ws, msgs))
                await asyncio.to_thread(hold.start)
                sent = list(range(20))
                for segment in sent:
                    await ws.send(_final(segment))
                async with asyncio.timeout(60):  # all read and queued: the engine is held
                    while not any(c.last_final_segment == sent[-1]
                                  for c in list(server.state.live_connections)):
                        await asyncio.sleep(0.05)
                loop.call_soon_threadsafe(server.state.begin_shutdown)
                async with asyncio.timeout(120):
                    await reader
                await asyncio.to_thread(hold.release)
                return sent, msgs, ws.close_code

        try:
            sent, msgs, code = asyncio.run(main())
        finally:
            hold.gate.set()
    assert code == 1001 and msgs[-1] == {"type": "done"}
    _assert_every_final_answered_once(sent, msgs)
    assert {m["code"] for m in msgs if m["type"] == "error"} == {"shutting_down"}
