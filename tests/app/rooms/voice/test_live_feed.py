"""The room voice's live feed: the track's pieces are the segments' frames, heard as they
are encoded; a feed fans them out per room and language (in memory, and on Debian's
redis-server to another replica's reader), bounded for a slow subscriber; a ticker that
fails is logged and ends the track rather than falling silent."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

from app.rooms.voice.aac import RATE, AacDecoder, adts_frames
from app.rooms.voice.live_feed import (
    QUEUE_PIECES,
    LivePiece,
    MemoryVoiceLive,
    pack_piece,
    unpack_piece,
)
from app.rooms.voice.redis_live import RedisVoiceLive
from app.rooms.voice.track import PIECE_S, RoomVoiceTrack, VoicePiece, VoiceSegment
from tests.redis_server import redis_server


def tone(seconds: float, hz: float = 440.0) -> bytes:
    t = np.arange(int(seconds * RATE)) / RATE
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


def test_pieces_come_as_the_clock_passes_and_make_up_the_segments() -> None:
    async def main() -> tuple[list[tuple[float, VoicePiece]], list[VoiceSegment]]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        pieces: list[tuple[float, VoicePiece]] = []
        segments: list[VoiceSegment] = []

        async def publish(segment: VoiceSegment) -> None:
            segments.append(segment)

        async def piece(p: VoicePiece) -> None:
            pieces.append((loop.time() - t0, p))

        track = RoomVoiceTrack(1.0, publish, lambda: loop.time() - t0, on_piece=piece)
        track.start()
        track.add(tone(0.6), RATE)
        await asyncio.sleep(1.6)
        track.add(tone(0.3, 660.0), RATE)
        await asyncio.sleep(0.5)
        await track.finish()
        return pieces, segments

    pieces, segments = asyncio.run(main())
    assert pieces[-1][1].last and not any(p.last for _, p in pieces[:-1])
    # every piece's frames are in a segment, in order, and nothing else is
    assert b"".join(p.audio for _, p in pieces) == b"".join(s.audio for s in segments)
    assert [s.index for s in segments] == [0, 1, 2]
    # while the talk ran, a piece came every PIECE_S or so (bounds against a stuck
    # ticker, not latency figures: the loop may be slow on a loaded machine)
    live = [at for at, p in pieces[:-1]]
    assert len(live) >= 4 and all(b - a < 4 * PIECE_S
                               for a, b in zip(live, live[1:], strict=False))
    # decoded, the pieces hold the speech: two tones, about 0.9 s of sound
    pcm = np.frombuffer(b"".join(AacDecoder().decode(p.audio) for _, p in pieces), "<i2")
    loud = sum(1 for i in range(0, len(pcm) - 240, 240)
               if np.sqrt((pcm[i:i + 240].astype(float) ** 2).mean()) > 2000)
    assert 0.7 <= loud / 100 <= 1.1, loud / 100


def test_a_ticker_that_fails_is_logged_and_ends_the_track(caplog) -> None:
    async def main() -> RoomVoiceTrack:
        loop = asyncio.get_running_loop()
        t0 = loop.time()

        async def publish(segment: VoiceSegment) -> None:
            return None

        track = RoomVoiceTrack(1.0, publish, lambda: loop.time() - t0)

        def broken(until: int) -> list:
            raise RuntimeError("encoder gone")

        track._encode_to = broken  # type: ignore[method-assign]
        track.start()
        await asyncio.sleep(0.6)
        return track

    with caplog.at_level(logging.ERROR, logger="livetrans.rooms"):
        track = asyncio.run(main())
    assert track.ended and isinstance(track.failed_task, RuntimeError)
    assert "the track stopped (RuntimeError)" in caplog.text


def test_a_piece_packs_and_adts_splits_whole_frames_only() -> None:
    piece = VoicePiece(b"\xff\xf1abc", -0.04, True)
    assert unpack_piece(pack_piece(piece)) == piece
    from app.rooms.voice.aac import AacStream

    frames = AacStream().encode(tone(0.5))
    data = b"".join(f.data for f in frames)
    assert adts_frames(data) == [f.data for f in frames]
    assert adts_frames(data[:-3]) == [f.data for f in frames[:-1]]
    assert adts_frames(b"not aac") == [] and AacDecoder().decode(b"not aac") == b""


def test_the_memory_feed_fans_out_per_room_and_language_and_drops_for_the_slow() -> None:
    async def main() -> None:
        feed = MemoryVoiceLive()
        de, ja = feed.follow("r", "de"), feed.follow("r", "ja")
        first_de = asyncio.ensure_future(de.__anext__())
        first_ja = asyncio.ensure_future(ja.__anext__())
        await asyncio.sleep(0)
        await feed.put("r", "de", "t1", VoicePiece(b"d", 0.0))
        await feed.put("other", "de", "t9", VoicePiece(b"x", 0.0))
        assert await first_de == LivePiece("t1", VoicePiece(b"d", 0.0))
        assert not first_ja.done()
        first_ja.cancel()
        for i in range(QUEUE_PIECES + 5):  # nobody reads de meanwhile
            await feed.put("r", "de", "t1", VoicePiece(bytes([i % 256]), float(i)))
        got = await de.__anext__()
        assert got.piece.first_s == 5.0 and feed.subscribers.lost == 5  # the oldest went
        await de.aclose()
        assert ("r", "de") not in feed.subscribers.queues

    asyncio.run(main())


def test_the_redis_feed_reaches_another_replicas_reader_from_now_on(tmp_path: Path) -> None:
    async def main(url: str) -> None:
        writer = RedisVoiceLive(aioredis.from_url(url, decode_responses=False))
        reader = RedisVoiceLive(aioredis.from_url(url, decode_responses=False))
        await writer.put("r", "de", "t0", VoicePiece(b"before", 0.0))  # not heard
        it = reader.follow("r", "de")
        other = reader.follow("r", "ja")
        waiting = asyncio.ensure_future(other.__anext__())
        nxt = asyncio.ensure_future(it.__anext__())
        await asyncio.sleep(0.6)  # the reader found where the stream stands
        for i in range(3):
            await writer.put("r", "de", "t1", VoicePiece(bytes([i]) * 10, i * 0.25,
                                                         last=i == 2))
        got = [await asyncio.wait_for(nxt, 10)]
        got += [await asyncio.wait_for(it.__anext__(), 10) for _ in range(2)]
        assert [g.talk for g in got] == ["t1"] * 3
        assert [g.piece.audio for g in got] == [bytes([i]) * 10 for i in range(3)]
        assert got[-1].piece.last and not waiting.done()
        waiting.cancel()
        await it.aclose()
        await reader.close()

    with redis_server(tmp_path) as redis:
        asyncio.run(main(redis.url))


def test_the_redis_reader_waits_out_a_redis_outage(tmp_path: Path, caplog) -> None:
    async def main(redis) -> None:  # noqa: ANN001 - tests.redis_server.RedisServer
        client = aioredis.from_url(redis.url, decode_responses=False)
        feed = RedisVoiceLive(client)
        it = feed.follow("r", "de")
        nxt = asyncio.ensure_future(it.__anext__())
        await asyncio.sleep(0.5)
        redis.stop()
        await asyncio.sleep(1.5)
        redis.start()
        await asyncio.sleep(1.5)
        await feed.put("r", "de", "t1", VoicePiece(b"after", 1.0))
        got = await asyncio.wait_for(nxt, 15)
        assert got.piece.audio == b"after"
        await it.aclose()
        await feed.close()

    with caplog.at_level(logging.INFO, logger="livetrans.rooms"), \
            redis_server(tmp_path) as redis:
        asyncio.run(main(redis))
    assert "Redis away" in caplog.text and "Redis is back" in caplog.text
    assert caplog.text.count("Redis away") == 1


