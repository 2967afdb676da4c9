"""Graceful shutdown of a real ``livetrans serve`` process: finals in flight still land."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import websockets

from tests.conftest import free_port


def test_sigterm_flushes_finals_and_closes_websockets_with_1001() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level",
         "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
            time.sleep(0.2)

        async def main() -> tuple[list[dict], int | None]:
            async with websockets.connect(f"ws://127.0.0.1:{port}/v1/live") as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
                await ws.recv()
                for seg in range(2):
                    await ws.send(json.dumps({"type": "partial", "segment": seg,
                                              "text": "We are almost"}))
                    await ws.send(json.dumps({"type": "final", "segment": seg,
                                              "text": "We are almost done with this talk."}))
                await asyncio.sleep(0.1)
                os.kill(proc.pid, signal.SIGTERM)
                msgs = []
                try:
                    async for raw in ws:
                        msgs.append(json.loads(raw))
                except websockets.ConnectionClosed:
                    pass
                return msgs, ws.close_code

        msgs, close_code = asyncio.run(main())
        finals = [m for m in msgs if m.get("type") == "caption" and m["final"]]
        assert [m["segment"] for m in finals] == [0, 1]
        assert msgs[-1]["type"] == "done" and close_code == 1001
        # uvicorn re-raises the signal after its graceful shutdown
        assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
