"""SIGTERM with pushes in flight: a real ``livetrans serve`` process and a real, slow HTTP
receiver on loopback (``tests.app.live.outputs.receiver``).

A speaker's talk pushes its finals to a webhook whose receiver holds every request until
the test opens it. SIGTERM comes while all of them wait: the talk ends (``done``, 1001),
then the receiver opens and answers slowly; every final that was captioned must reach it
before the process exits, and the process still exits within its grace. A receiver that
never answers does not keep the process past ``--shutdown-grace-s``. Waits are bounds
against hanging, never timings.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import websockets

from tests.app.live.outputs.receiver import Receiver
from tests.server_process import serve_process

GRACE_S = 20
SOURCES = ["Good morning, everyone.", "Welcome to the keynote.", "Let us begin.",
           "Thank you very much."]


async def _speak_then_sigterm(port: int, pid: int, url: str, room: str,
                              before_sigterm: asyncio.Event | None = None,
                              ) -> tuple[list[dict], int | None]:
    """A speaker with a webhook: a final per source, SIGTERM once every final is captioned;
    every frame until the server closes the socket, and its close code."""
    async with websockets.connect(f"ws://127.0.0.1:{port}/v1/live") as ws:
        await ws.send(json.dumps({
            "type": "start", "target_lang": "de", "room": room, "drafters": [],
            "outputs": [{"type": "webhook", "url": url + "/hook", "secret": "s3cret"}]}))
        ready = json.loads(await ws.recv())
        assert ready["type"] == "ready", ready
        for seg, text in enumerate(SOURCES):
            await ws.send(json.dumps({"type": "final", "segment": seg, "text": text}))
        msgs: list[dict] = []
        async with asyncio.timeout(300):
            while len([m for m in msgs if m.get("type") == "caption" and m["final"]]) \
                    < len(SOURCES):
                msgs.append(json.loads(await ws.recv()))
        os.kill(pid, signal.SIGTERM)
        try:
            async for raw in ws:
                msgs.append(json.loads(raw))
        except websockets.ConnectionClosed:
            pass
        return msgs, ws.close_code


def test_sigterm_delivers_every_captioned_final_to_a_slow_receiver_before_exit() -> None:
    with Receiver() as rx, serve_process("--output-allow-host", "127.0.0.1",
                                         "--shutdown-grace-s", str(GRACE_S)) as (proc, port):
        rx.gate.clear()  # every push waits at the receiver until the talk has ended
        rx.delay_s = 0.3  # ... and then each is answered slowly
        msgs, close_code = asyncio.run(
            _speak_then_sigterm(port, proc.pid, rx.url, "push-shutdown-1"))
        assert msgs[-1]["type"] == "done" and close_code == 1001
        assert rx.hits <= 1 and not rx.requests  # nothing delivered before the talk ended
        rx.gate.set()
        # the process exits only once the pushes are delivered (a bound, not a timing)
        assert proc.wait(GRACE_S + 60) in (0, -signal.SIGTERM)
        delivered = [json.loads(r.body) for r in rx.requests]
    finals = [m for m in msgs if m.get("type") == "caption" and m["final"]]
    assert [f["segment"] for f in finals] == list(range(len(SOURCES)))
    assert [(d["segment"], d["text"]) for d in delivered] == \
        [(f["segment"], f["text"]) for f in finals]


def test_a_receiver_that_never_answers_is_cut_off_when_the_grace_ends(tmp_path: Path,
                                                                       ) -> None:
    """The talk's own flush would wait 15 s for it; the grace (3 s) ends it first, and
    the log says how many finals did not make it."""
    grace = 3
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log, Receiver() as rx, \
            serve_process("--output-allow-host", "127.0.0.1", "--shutdown-grace-s",
                          str(grace), "--output-timeout-s", "300", "--output-retry-s",
                          "300", stderr=log) as (proc, port):
        rx.hang = True  # no push is ever answered
        msgs, close_code = asyncio.run(
            _speak_then_sigterm(port, proc.pid, rx.url, "push-shutdown-2"))
        assert msgs[-1]["type"] == "done" and close_code == 1001
        # it exits by itself (serve_process would kill it only on the way out)
        assert proc.wait(grace + 60) in (0, -signal.SIGTERM)
        assert rx.hits == 1 and not rx.requests  # the first is under way, three wait
    lines = [line for line in log_path.read_text().splitlines()
             if "shutdown grace ran out" in line]
    assert len(lines) == 1 and "1 ended talks" in lines[0] and \
        f"{len(SOURCES)} finals were not delivered" in lines[0]
