"""Ended talks' flushes (``app.live.outputs.flushes``): what the server's shutdown awaits.

Real ``Pushes`` against a real local receiver (``Receiver``, a thread): a slow receiver
gets every queued final before ``wait`` returns; a hanging one is cut off when the time
given runs out, its finals counted as failed and logged in one line. Waits are bounds
against hanging, never timings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputSpec
from app.live.outputs.delivery import DeliveryTimes, Pushes
from app.live.outputs.flushes import PushFlushes
from app.rooms.bus import TalkInfo
from app.rooms.transcripts.store import TranscriptLine
from tests.app.live.outputs.receiver import Receiver

LOOPBACK = HostPolicy.from_entries(["127.0.0.1"])
# long enough that only ``wait``'s own limit can cut a flush short
PATIENT = DeliveryTimes(request_s=60.0, retry_s=60.0, flush_s=60.0, backoff_first_s=0.05,
                        backoff_max_s=0.2)
INFO = TalkInfo(room="keynote-1", talk_id="t-1", replica="r", langs=("de",), started_at=0.0)


def hook(url: str) -> OutputSpec:
    return OutputSpec(index=0, type="webhook", url=url + "/hook", host="127.0.0.1",
                      lang="de", secret="s")


def line(segment: int) -> TranscriptLine:
    return TranscriptLine(segment=segment, start_s=float(segment), end_s=segment + 0.5,
                          source=f"Sentence {segment}.", text=f"Satz {segment}.")


async def _until(check: Callable[[], bool], limit: float = 30) -> None:
    async with asyncio.timeout(limit):
        while not check():
            await asyncio.sleep(0.02)


def test_wait_returns_once_a_slow_receiver_has_every_final() -> None:
    with Receiver() as rx:
        rx.delay_s = 0.2

        async def main() -> tuple[int, int]:
            flushes = PushFlushes()
            pushes = Pushes([hook(rx.url)], LOOPBACK, PATIENT, flushes=flushes)
            for seg in range(3):
                pushes.final(INFO, "de", line(seg))
            pushes.close()  # the talk ended: its flush runs in ``flushes``
            assert len(flushes.running) == 1
            lost = await flushes.wait(60)
            return lost, len(flushes.running)

        lost, running = asyncio.run(main())
        assert (lost, running) == (0, 0)
        assert [r.body.count(b"Satz") for r in rx.requests] == [1, 1, 1]  # all three, now


def test_a_flush_still_under_way_when_the_time_is_up_is_cut_off_and_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    events: list[tuple[str, str, float]] = []
    with Receiver() as rx:
        rx.hang = True

        async def main() -> tuple[int, int, list[dict]]:
            flushes = PushFlushes()
            pushes = Pushes([hook(rx.url)], LOOPBACK, PATIENT, flushes=flushes,
                            on_event=lambda *e: events.append(e))
            pushes.final(INFO, "de", line(0))
            pushes.final(INFO, "de", line(1))
            await _until(lambda: rx.hits == 1)  # the first is under way, the second queued
            pushes.close()
            lost = await flushes.wait(0.2)
            return lost, len(flushes.running), pushes.stats("de")

        with caplog.at_level(logging.WARNING, logger="livetrans.live.outputs"):
            lost, running, stats = asyncio.run(main())
    assert (lost, running) == (2, 0)
    assert stats[0]["failed"] == 2 and stats[0]["pending"] == 0
    assert [e[1] for e in events].count("failed") == 2
    lines = [r.getMessage() for r in caplog.records if "shutdown grace" in r.getMessage()]
    assert lines == ["shutdown: the pushes of 1 ended talks were still delivering when the "
                     "shutdown grace ran out (--shutdown-grace-s); 2 finals were not "
                     "delivered"]


def test_a_flush_that_starts_while_waiting_is_waited_for_too() -> None:
    with Receiver() as first, Receiver() as second:
        first.delay_s = 0.2

        async def main() -> int:
            flushes = PushFlushes()
            early = Pushes([hook(first.url)], LOOPBACK, PATIENT, flushes=flushes)
            late = Pushes([hook(second.url)], LOOPBACK, PATIENT, flushes=flushes)
            early.final(INFO, "de", line(0))
            late.final(INFO, "de", line(1))
            early.close()
            waiting = asyncio.create_task(flushes.wait(60))
            await _until(lambda: first.hits == 1)  # ``wait`` is waiting for the first
            late.close()  # a talk that ends during the shutdown
            return await waiting

        assert asyncio.run(main()) == 0
        assert len(first.requests) == 1 and len(second.requests) == 1


def test_nothing_to_wait_for() -> None:
    assert asyncio.run(PushFlushes().wait(0)) == 0
