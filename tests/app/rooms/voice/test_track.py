"""A room voice's track: speech laid on the talk's clock, cut into AAC segments, and what
ffmpeg (Debian's) makes of their playlist: one continuous stream, the speech where the
clock put it, nothing overlapping, no segment changed once published."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from app.rooms.voice.aac import RATE, AacStream, adts_header
from app.rooms.voice.playlist import id3_timestamp, render_playlist
from app.rooms.voice.segments import MemoryVoiceSegments, TrackIndex, pack, unpack
from app.rooms.voice.track import RoomVoiceTrack, VoiceSegment

FFMPEG = shutil.which("ffmpeg")
needs_ffmpeg = pytest.mark.skipif(FFMPEG is None, reason="Debian package 'ffmpeg' is needed")
SEGMENT_S = 2.0


def tone(seconds: float, hz: float = 440.0, rate: int = RATE) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_adts_headers_frame_every_aac_packet() -> None:
    frames = AacStream().encode(tone(0.5)) + AacStream().flush()
    assert frames
    for frame in AacStream().encode(tone(1.0)):
        assert frame.data[:2] == b"\xff\xf1"
        length = ((frame.data[3] & 3) << 11) | (frame.data[4] << 3) | (frame.data[5] >> 5)
        assert length == len(frame.data)
    assert adts_header(100)[:2] == b"\xff\xf1" and len(adts_header(100)) == 7


def test_speech_is_placed_after_the_speech_before_it_and_never_in_the_past() -> None:
    async def main() -> tuple[RoomVoiceTrack, list[VoiceSegment]]:
        clock = Clock()
        published: list[VoiceSegment] = []

        async def publish(segment: VoiceSegment) -> None:
            published.append(segment)

        track = RoomVoiceTrack(SEGMENT_S, publish, clock)
        clock.now = 0.5
        track.add(tone(1.0), RATE)           # heard 0.5 - 1.5
        track.add(tone(1.0, rate=16000), 16000)  # right after it: 1.5 - 2.5
        assert track.end_s == pytest.approx(2.5, abs=1e-3)  # the resampler holds a sample
        await track.cut()                    # segment 0: 0 - 2 s
        clock.now = 3.0
        track.add(tone(0.5), RATE)           # 3.0 - 3.5: after a pause, from now
        assert track.end_s == pytest.approx(3.5)
        clock.now = 6.0
        await track.finish()
        return track, published

    track, published = asyncio.run(main())
    assert [s.index for s in published] == [0, 1]
    assert published[0].duration_s == SEGMENT_S
    # the last segment reaches the end of the speech (3.5 s)
    assert published[1].duration_s == pytest.approx(1.5)
    assert track.spoken_s == pytest.approx(2.5, abs=1e-3) and track.dropped_s == 0
    # the first frame's time: the encoder's priming makes it negative in segment 0
    assert published[0].first_s < 0 < published[1].first_s


def test_speech_too_far_ahead_of_the_clock_is_dropped_and_counted() -> None:
    async def publish(segment: VoiceSegment) -> None:
        return None

    track = RoomVoiceTrack(SEGMENT_S, publish, Clock())
    for _ in range(130):
        track.add(tone(1.0), RATE)
    assert track.end_s == pytest.approx(120.0) and track.dropped_s == pytest.approx(10.0)
    assert len(track.pending) == 120 * RATE  # bounded


def test_a_store_away_for_a_moment_loses_nothing(caplog) -> None:
    calls = 0

    async def publish(segment: VoiceSegment) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("store away")

    async def main() -> RoomVoiceTrack:
        track = RoomVoiceTrack(SEGMENT_S, publish, Clock())
        track.add(tone(3.0), RATE)
        await track.finish()
        return track

    with caplog.at_level(logging.INFO, logger="livetrans.rooms"):
        track = asyncio.run(main())
    # segment 0 refused, then written again before segment 1: both stored, in order
    assert track.failed == 1 and calls == 3 and track.lost == 0
    assert "not stored" in caplog.text and "took the segments it had missed" in caplog.text


def test_a_store_away_for_long_gives_up_the_oldest_and_says_so(caplog, monkeypatch) -> None:
    from app.rooms.voice import track as track_module

    monkeypatch.setattr(track_module, "MAX_UNSTORED_S", 4.0)  # two segments
    monkeypatch.setattr(track_module, "END_RETRY_S", 0.0)
    stored: list[int] = []
    away = True

    async def publish(segment: VoiceSegment) -> None:
        if away:
            raise ConnectionError("store away")
        stored.append(segment.index)

    async def main() -> RoomVoiceTrack:
        nonlocal away
        track = RoomVoiceTrack(SEGMENT_S, publish, Clock())
        track.add(tone(9.0), RATE)
        for _ in range(4):  # segments 0-3 refused; 0 and 1 given up past the bound
            await track.cut()
        away = False
        await track.finish()  # 2 and 3 written first, then the last ones
        return track

    track = asyncio.run(main())
    assert track.lost == 2 and stored == [2, 3, 4]
    assert caplog.text.count("given up") == 2 and caplog.text.count("not stored (") == 1


def test_the_memory_store_keeps_the_newest_within_its_bounds() -> None:
    async def main() -> MemoryVoiceSegments:
        store = MemoryVoiceSegments(max_track_bytes=3000, max_total_bytes=5000)
        for i in range(5):
            await store.put("r", "t1", "de", VoiceSegment(i, b"x" * 1000, i * 2.0, 2.0))
        await store.end("r", "t1", "de", 5)
        index = await store.index("r", "t1", "de")
        assert index == TrackIndex({2: 2.0, 3: 2.0, 4: 2.0}, True)
        for i in range(3):
            await store.put("r", "t2", "de", VoiceSegment(i, b"y" * 1000, i * 2.0, 2.0))
        assert await store.index("r", "t1", "de") is None  # the oldest talk went
        assert (await store.get("r", "t2", "de", 2)).audio == b"y" * 1000
        assert await store.index("r", "t2", "ja") is None
        return store

    store = asyncio.run(main())
    assert store.total == 3000
    segment = VoiceSegment(7, b"abc", -0.04, 2.0)
    assert unpack(7, pack(segment)) == segment


def test_the_id3_tag_carries_the_90khz_timestamp() -> None:
    tag = id3_timestamp(10.0)
    assert tag.startswith(b"ID3\x04") and b"com.apple.streaming.transportStreamTimestamp" in tag
    assert int.from_bytes(tag[-8:], "big") == 900_000
    assert int.from_bytes(id3_timestamp(-1.0)[-8:], "big") == 2 ** 33 - 90_000


def test_playlists_live_and_ended() -> None:
    live = render_playlist(TrackIndex({i: 2.0 for i in range(10)}, False), 2.0, 8.0,
                           lambda i: f"de/t/{i}.aac")
    assert "#EXT-X-MEDIA-SEQUENCE:6" in live and live.count("#EXTINF") == 4
    assert "#EXT-X-ENDLIST" not in live
    ended = render_playlist(TrackIndex({i: 2.0 for i in range(10)} | {10: 0.5}, True), 2.0,
                            8.0, lambda i: f"de/t/{i}.aac")
    assert "#EXT-X-MEDIA-SEQUENCE:0" in ended and ended.count("#EXTINF") == 11
    assert ended.rstrip().endswith("#EXT-X-ENDLIST") and "#EXTINF:0.500," in ended


@needs_ffmpeg
def test_ffmpeg_reads_the_segments_as_one_stream_with_the_speech_in_place(
        tmp_path: Path) -> None:
    async def main() -> list[VoiceSegment]:
        clock = Clock()
        published: list[VoiceSegment] = []

        async def publish(segment: VoiceSegment) -> None:
            published.append(segment)

        track = RoomVoiceTrack(SEGMENT_S, publish, clock)
        clock.now = 1.0
        track.add(tone(1.0), RATE)  # 1 - 2 s
        await track.cut()
        await track.cut()  # 2 - 4 s: silence
        clock.now = 4.5
        track.add(tone(2.0, 660.0), RATE)  # 4.5 - 6.5 s: across a boundary
        clock.now = 7.0
        await track.finish()
        return published

    published = asyncio.run(main())
    offset = 10.0
    for s in published:
        (tmp_path / f"{s.index}.aac").write_bytes(id3_timestamp(offset + s.first_s) + s.audio)
    playlist = render_playlist(TrackIndex({s.index: s.duration_s for s in published}, True),
                               SEGMENT_S, 8.0, lambda i: f"{i}.aac")
    (tmp_path / "voice.m3u8").write_text(playlist)
    raw = subprocess.run([FFMPEG, "-v", "error", "-allowed_extensions", "ALL", "-i",
                          str(tmp_path / "voice.m3u8"), "-f", "s16le", "-ac", "1", "-ar",
                          str(RATE), "-"], capture_output=True, check=True).stdout
    audio = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    assert abs(len(audio) / RATE - 6.5) < 0.2, len(audio) / RATE
    rms = [np.sqrt((audio[i:i + RATE // 10] ** 2).mean())
           for i in range(0, len(audio) - RATE // 10, RATE // 10)]
    loud = [i / 10 for i, r in enumerate(rms) if r > 2000]
    # the speech where the clock put it (within an AAC frame or two), silence elsewhere
    assert loud and abs(loud[0] - 1.0) <= 0.15 and abs(loud[-1] - 6.4) <= 0.15, loud
    gap = [t for t in loud if 2.1 < t < 4.4]
    assert gap == [], gap
    # continuous across the boundary at 6 s: no dropout inside the second tone
    second = [r for i, r in enumerate(rms) if 4.6 <= i / 10 <= 6.3]
    assert min(second) > 2000, min(second)
