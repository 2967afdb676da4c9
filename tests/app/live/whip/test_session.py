"""The WHIP session's socket (``app.live.whip.session.WhipSocket``): audio a publisher sends
faster than its talk takes it in is dropped beyond a bounded queue, and the seconds dropped
reach the server's metrics (``livetrans_asr_dropped_audio_seconds_total``). A talk that does
not get ready in time is cancelled with the refusal; a session is found for ``DELETE`` only
by the key that published it. The whole WHIP path with a real WebRTC peer is
``tests/app/live/whip/test_route.py``."""

from __future__ import annotations

import asyncio

import pytest

from app.live.whip.session import PCM_RATE, QUEUE_FRAMES, WhipSocket

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


def test_a_talk_that_is_not_ready_in_time_is_cancelled_not_left_to_claim_the_room() -> None:
    pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
    asyncio.run(_not_ready())


async def _not_ready() -> None:
    from app.live.whip.session import SessionRefused, WhipSessions
    from tests.whip_offers import obs_offer

    began, ended = asyncio.Event(), asyncio.Event()

    async def slow_talk(socket: WhipSocket) -> None:
        """A talk whose model is still loading: it never says 'ready' by itself."""
        began.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    sessions = WhipSessions(ready_wait_s=0)
    with pytest.raises(SessionRefused) as refused:
        await sessions.open("r1", obs_offer("av1"), {"type": "start"}, slow_talk)
    assert refused.value.refusal.code == "not_ready"
    assert ended.is_set() or not began.is_set()  # ended before the refusal was raised
    assert sessions.sessions == {}


def test_delete_finds_only_the_publishers_own_session() -> None:
    from app.live.whip.session import WhipSession, WhipSessions

    sessions = WhipSessions()
    session = WhipSession("r1", WhipSocket({"type": "start"}), pc=None, owner="owner-a")
    sessions.sessions[session.id] = session
    assert sessions.get("r1", session.id, "owner-a") is session
    assert sessions.get("r1", session.id, "owner-b") is None
    assert sessions.get("r1", session.id, None) is None
    assert sessions.get("r2", session.id, "owner-a") is None


def test_a_publish_cancelled_while_its_talk_starts_ends_the_talk_too() -> None:
    pytest.importorskip("aiortc", reason="aiortc (livetrans[speech]) is not installed")
    asyncio.run(_cancelled_publish())


async def _cancelled_publish() -> None:
    from app.live.whip.session import WhipSessions
    from tests.whip_offers import obs_offer

    began, ended = asyncio.Event(), asyncio.Event()

    async def slow_talk(socket: WhipSocket) -> None:
        began.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    sessions = WhipSessions()
    publish = asyncio.ensure_future(
        sessions.open("r1", obs_offer("hevc"), {"type": "start"}, slow_talk))
    await began.wait()
    publish.cancel()  # e.g. the server shuts down while the talk is starting
    with pytest.raises(asyncio.CancelledError):
        await publish
    assert ended.is_set() and sessions.sessions == {}
