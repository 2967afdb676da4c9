"""Graceful shutdown of a real ``livetrans serve`` process: finals in flight still land."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import websockets

from tests.server_process import serve_process


def test_sigterm_flushes_finals_and_closes_websockets_with_1001() -> None:
    with serve_process() as (proc, port):
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


def test_a_stopped_server_leaves_nothing_frozen() -> None:
    """Start-up freezes what it made (``gc.freeze``: out of the collector's way while it
    serves); stopping unfreezes it, so a process that runs servers in turn (benchmarks,
    this test suite) gets each stopped one's memory back (it kept ~600 MB a server)."""
    import gc

    from eval.local_server import LocalServer

    with LocalServer():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
