"""A listener's track: the room voice as it comes, paced in 20 ms frames; a short wait
after running dry (not a stutter per piece); never more than ``MAX_QUEUED_S`` behind."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("aiortc", reason="aiortc is the speech extra's")

from app.live.listen.track import (  # noqa: E402
    FRAME_SAMPLES,
    MAX_QUEUED_S,
    PREBUFFER_S,
    TARGET_S,
    ListenerTrack,
)
from app.rooms.voice.aac import RATE  # noqa: E402


def frames(track: ListenerTrack, n: int) -> list[np.ndarray]:
    async def main() -> list[np.ndarray]:
        return [(await track.recv()).to_ndarray().reshape(-1) for _ in range(n)]

    return asyncio.run(main())


def ones(seconds: float) -> bytes:
    return (np.ones(int(seconds * RATE)) * 1000).astype("<i2").tobytes()


def test_silence_until_enough_is_queued_then_the_speech_in_order() -> None:
    track = ListenerTrack()
    track.feed(ones(PREBUFFER_S / 2))
    got = frames(track, 2)
    assert all(not f.any() for f in got)  # not enough yet: silence, nothing taken
    track.feed(ones(PREBUFFER_S))
    got = frames(track, 3)
    assert all(f.shape == (FRAME_SAMPLES,) and (f == 1000).all() for f in got)
    assert track.heard_s == pytest.approx(3 * FRAME_SAMPLES / RATE)


def test_running_dry_waits_for_the_prebuffer_again() -> None:
    track = ListenerTrack()
    track.feed(ones(PREBUFFER_S + 0.01))
    n = int((PREBUFFER_S + 0.01) * RATE) // FRAME_SAMPLES + 1
    frames(track, n)  # drained, the last frame partly silent
    assert track.buffering
    track.feed(ones(0.05))  # a small piece: not played alone
    assert not any(f.any() for f in frames(track, 1))


def test_a_burst_is_won_back_from_the_pauses_first() -> None:
    track = ListenerTrack()
    silence = bytes(int(0.5 * RATE) * 2)
    track.feed(ones(0.3) + silence + ones(0.3) + silence)  # 1.6 s at once
    assert len(track.pending) == int(TARGET_S * RATE) * 2  # every word kept
    assert track.skipped_pause_s == pytest.approx(1.0, abs=0.03) and track.skipped_s == 0
    samples = np.frombuffer(bytes(track.pending), "<i2")
    assert (samples == 1000).sum() == 2 * int(0.3 * RATE)


def test_a_listener_that_falls_far_behind_jumps_to_the_live_edge() -> None:
    track = ListenerTrack()
    track.feed(ones(MAX_QUEUED_S + 1.0))  # speech, no pause to skip
    assert len(track.pending) == int(MAX_QUEUED_S * RATE) * 2
    assert track.skipped_s == pytest.approx(1.0, abs=1e-3)
    track.stop()
    track.feed(ones(1.0))
    assert not track.pending
