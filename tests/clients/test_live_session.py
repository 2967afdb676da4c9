"""``clients.live_session.LiveSession`` against a stand-in ``/v1/live`` server (no model):
start, updates, audio, stop and ``done``; a refused start."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from clients.live_session import LiveSession, LiveSessionRefused


async def _stand_in(ws) -> None:  # noqa: ANN001 - a websockets server connection
    """Refuses a start without a language; else captions each update, counts audio bytes."""
    audio = 0
    async for raw in ws:
        if isinstance(raw, bytes):
            audio += len(raw)
            continue
        msg = json.loads(raw)
        if msg["type"] == "start":
            if not msg.get("target_lang"):
                await ws.send(json.dumps({"type": "error", "code": "invalid_message",
                                          "message": "no language"}))
                return
            await ws.send(json.dumps({"type": "ready", "auth": ws.request.headers.get(
                "Authorization")}))
        elif msg["type"] in ("partial", "final"):
            await ws.send(json.dumps({"type": "caption", "segment": msg["segment"],
                                      "final": msg["type"] == "final",
                                      "text": msg["text"].upper()}))
        elif msg["type"] == "stop":
            await ws.send(json.dumps({"type": "done", "audio_bytes": audio}))


def _run(body) -> None:  # noqa: ANN001 - a coroutine function taking the URL
    async def main() -> None:
        async with websockets.serve(_stand_in, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            await body(f"ws://127.0.0.1:{port}/v1/live")

    asyncio.run(main())


def test_a_session_starts_sends_and_ends_with_done() -> None:
    async def body(url: str) -> None:
        async with LiveSession(url, api_key="k1") as live:
            ready = await live.start(target_lang="de")
            assert ready["type"] == "ready" and ready["auth"] == "Bearer k1"
            await live.send_update("partial", "hello", segment=3)
            frame = await live.recv(timeout=5)
            assert (frame["type"], frame["segment"], frame["final"], frame["text"]) == \
                ("caption", 3, False, "HELLO")
            await live.send_audio(b"\x00\x00" * 160)
            await live.stop()
            frames = await live.until_done()
            assert frames[-1] == {"type": "done", "audio_bytes": 320}

    _run(body)


def test_a_refused_start_raises_with_the_servers_code() -> None:
    async def body(url: str) -> None:
        async with LiveSession(url) as live:
            with pytest.raises(LiveSessionRefused) as refused:
                await live.start(target_lang="")
            assert refused.value.code == "invalid_message"
            assert "no language" in str(refused.value)

    _run(body)
