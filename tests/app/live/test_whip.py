"""The WHIP session's socket (``app.live.whip.WhipSocket``): audio a publisher sends faster
than its talk takes it in is dropped beyond a bounded queue, and the seconds dropped reach
the server's metrics (``livetrans_asr_dropped_audio_seconds_total``). The whole WHIP path
with a real WebRTC peer is ``tests/app/api/test_whip.py``."""

from __future__ import annotations

import asyncio

import pytest

from app.live.whip import PCM_RATE, QUEUE_FRAMES, WhipSocket

FRAME = b"\0\0" * (PCM_RATE // 50)  # 20 ms of mono s16le, an Opus frame's worth


def test_audio_beyond_the_queue_is_dropped_and_counted() -> None:
    asyncio.run(_beyond_the_queue())


async def _beyond_the_queue() -> None:
    reported: list[float] = []
    socket = WhipSocket({"type": "start"}, on_dropped=reported.append)
    await socket.receive()  # the start frame
    for _ in range(QUEUE_FRAMES + 10):
        socket.push_audio(FRAME)
    assert socket.audio_frames == QUEUE_FRAMES
    assert socket.dropped_s == pytest.approx(10 * 0.02)
    assert sum(reported) == pytest.approx(10 * 0.02) and len(reported) == 10
    await socket.receive()  # the talk takes one frame: one more fits
    socket.push_audio(FRAME)
    assert len(reported) == 10


def test_audio_after_stop_is_ignored_not_counted() -> None:
    reported: list[float] = []
    socket = WhipSocket({"type": "start"}, on_dropped=reported.append)
    socket.push_stop()
    socket.push_audio(FRAME)
    assert socket.audio_frames == 0 and reported == []
