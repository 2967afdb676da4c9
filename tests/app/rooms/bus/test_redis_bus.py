"""The Redis room bus against Debian's redis-server on loopback: two "replicas" (two buses,
two room registries, one event loop; no model) sharing rooms. One speaker per room across
replicas; a talk's finals to the other replica's viewers once and in order through each of
Redis's real faults (connections killed, error replies, a stall past the socket timeout, a
restart with and without its data); foreign entries of every shape skipped; leases; every
background task restarted after a bug."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from app.rooms import outbox as outbox_module
from app.rooms.bus import redis_core, redis_reader
from app.rooms.bus.base import BusUnavailable, RoomTakenOnBus, TalkInfo
from app.rooms.bus.redis_bus import RedisBus, probe
from app.rooms.registry import RoomRegistry, RoomTakenError
from tests.redis_server import RedisServer, redis_server, sentinel_watching_a_pair

BOUNDS = {"max_viewers": 9, "max_per_room": 9}
ROOM = "keynote"


def _talk(room: str, replica: str, talk_id: str = "t1") -> TalkInfo:
    return TalkInfo(room=room, talk_id=talk_id, replica=replica, langs=("de",),
                    started_at=1.0)


def _caption(segment: int, final: bool, text: str = "x") -> tuple[dict, str]:
    payload = {"type": "caption", "segment": segment, "lang": "de", "final": final,
               "text": f"{text}{segment}", "source": "s"}
    return payload, json.dumps(payload)


async def _frames(viewer, until_final: int, timeout: float = 30.0) -> list[dict]:
    """A viewer queue's frames until the final of segment ``until_final``."""
    got: list[dict] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        frame = viewer.queue.pop()
        if frame is None:
            await asyncio.sleep(0.01)
            continue
        data = json.loads(frame.text)
        got.append(data)
        if data.get("final") and data.get("segment") == until_final:
            return got
    raise TimeoutError(got)


async def _until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.02)


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_module, "RETRY_S", (0.05, 0.1, 0.2))
    monkeypatch.setattr(redis_reader, "RETRY_S", (0.05, 0.1, 0.2))


@pytest.fixture()
def redis(tmp_path: Path):
    # persisted, as docker/compose.yaml runs it: an outage is a restart, not a wipe
    with redis_server(tmp_path / "redis", persist=True) as server:
        yield server


@pytest.fixture()
def volatile_redis(tmp_path: Path):
    with redis_server(tmp_path / "redis-volatile") as server:
        yield server


async def _started(url: str, lease_s: float = 10.0, **kwargs):  # noqa: ANN202
    a, b = RedisBus(url, "a", lease_s=lease_s, **kwargs), RedisBus(url, "b", lease_s=lease_s,
                                                                   **kwargs)
    reg_a, reg_b = RoomRegistry(), RoomRegistry()
    await a.start(reg_a)
    await b.start(reg_b)
    return a, b, reg_a, reg_b


async def _watch(bus: RedisBus, registry: RoomRegistry, room: str = ROOM):  # noqa: ANN202
    """A viewer as ``/v1/live/watch`` makes one: follow the room, then join at once."""
    await bus.follow(room)
    return registry.join(room, "de", **BOUNDS)


async def _running(a: RedisBus, b: RedisBus, reg_b: RoomRegistry):  # noqa: ANN202
    """A talk on a with a viewer on b that has had its first final."""
    talk = _talk(ROOM, "a")
    await a.claim(talk)
    viewer, _ = await _watch(b, reg_b)
    a.caption(talk, *_caption(0, True))
    await _frames(viewer, until_final=0)
    return talk, viewer


def _finals(frames: list[dict]) -> list[int]:
    return [f["segment"] for f in frames if f.get("final")]


def test_one_speaker_per_room_across_replicas(redis: RedisServer) -> None:
    async def scenario() -> None:
        a, b, _, _ = await _started(redis.url)
        try:
            await a.claim(_talk(ROOM, "a"))
            with pytest.raises(RoomTakenOnBus):
                await b.claim(_talk(ROOM, "b", "t2"))
            assert (await b.current_talk(ROOM)).talk_id == "t1"
            await asyncio.wait_for(a.release(_talk(ROOM, "a")), 5)
            assert await b.current_talk(ROOM) is None
            await b.claim(_talk(ROOM, "b", "t2"))  # free again
        finally:
            await a.close(1)
            await b.close(1)

    asyncio.run(scenario())


def test_a_join_storm_shares_a_bounded_pool_of_connections(redis: RedisServer) -> None:
    """Hundreds of viewers joining at once look the room up on Redis together: they wait
    their turn on a bounded pool rather than each opening a connection."""
    async def scenario() -> tuple[int, int]:
        bus, registry = RedisBus(redis.url, "a"), RoomRegistry()
        await bus.start(registry)
        try:
            await bus.claim(_talk(ROOM, "a"))
            found = await asyncio.gather(*(bus.current_talk(ROOM) for _ in range(400)))
            clients = await bus.client.client_list()
            return sum(t is not None and t.talk_id == "t1" for t in found), len(clients)
        finally:
            await bus.close(1)

    found, clients = asyncio.run(scenario())
    assert found == 400
    assert clients <= redis_core.MAX_CONNECTIONS + 4  # + reader, leases


def test_a_late_viewer_gets_the_talks_finals_from_the_stream_then_the_rest_once(
        redis: RedisServer) -> None:
    async def scenario() -> tuple[list[dict], list[dict], list]:
        a, b, _, reg_b = await _started(redis.url)
        try:
            talk = _talk(ROOM, "a")
            await a.claim(talk)
            for seg in range(3):  # before anyone on b watches
                a.caption(talk, *_caption(seg, False))
                a.caption(talk, *_caption(seg, True))
            assert await a.outbox.drain(5)
            viewer, recent = await _watch(b, reg_b)
            for seg in range(3, 6):
                a.caption(talk, *_caption(seg, False))
                a.caption(talk, *_caption(seg, True))
            live = await _frames(viewer, until_final=5)
            a.release(talk)
            await _until(lambda: viewer.queue.closed)
            return recent, live, list(viewer.queue.frames)
        finally:
            await a.close(1)
            await b.close(1)

    recent, live, rest = asyncio.run(scenario())
    assert [f["segment"] for f in recent] == [0, 1, 2]
    assert _finals(live) == [3, 4, 5]  # the other replica's finals, once each, in order
    assert all(f["segment"] >= 3 for f in live)  # no partial of an earlier segment
    assert rest == []


def test_a_replica_reads_only_the_rooms_its_viewers_watch(redis: RedisServer) -> None:
    async def scenario() -> tuple[set[str], set[str]]:
        a, b, _, reg_b = await _started(redis.url)
        try:
            for room in ("r1", "r2", "r3"):
                await a.claim(_talk(room, "a", f"t-{room}"))
            viewer, _ = await _watch(b, reg_b, "r2")
            followed = set(b.follows)
            reg_b.leave(viewer)
            await _until(lambda: not b.follows)
            return followed, set(b.follows)
        finally:
            await a.close(1)
            await b.close(1)

    followed, after = asyncio.run(scenario())
    assert followed == {"r2"} and after == set()


async def _talk_through_a_fault(url: str, fault: Callable[[], Awaitable[None]],
                                heal: Callable[[], Awaitable[None]]) -> tuple[list, list]:
    """A talk with a viewer on the other replica: three finals, the fault, six finals
    during it (partials too), the fault healed, two more. What the viewer got."""
    a, b, _, reg_b = await _started(url)
    try:
        talk = _talk(ROOM, "a")
        await a.claim(talk)
        viewer, recent = await _watch(b, reg_b)
        for seg in range(3):
            a.caption(talk, *_caption(seg, True))
        first = await _frames(viewer, until_final=2)
        await fault()
        for seg in range(3, 9):
            a.caption(talk, *_caption(seg, False))
            a.caption(talk, *_caption(seg, True))
            await asyncio.sleep(0.2)
        await heal()
        for seg in range(9, 11):
            a.caption(talk, *_caption(seg, True))
        live = await _frames(viewer, until_final=10, timeout=60)
        await asyncio.sleep(0.5)  # anything sent twice would be here by now
        late = [json.loads(f.text) for f in viewer.queue.frames]
        return recent, first + live + late
    finally:
        await a.close(5)
        await b.close(5)


def _nothing() -> Callable[[], Awaitable[None]]:
    async def nothing() -> None:
        return None

    return nothing


def test_every_final_once_in_order_while_connections_are_killed(redis: RedisServer) -> None:
    async def kill() -> None:
        for _ in range(3):
            redis.cli("CLIENT", "KILL", "TYPE", "normal")
            redis.cli("CLIENT", "KILL", "TYPE", "pubsub")
            await asyncio.sleep(0.3)

    recent, frames = asyncio.run(_talk_through_a_fault(redis.url, kill, _nothing()))
    assert _finals(recent + frames) == list(range(11))


def test_every_final_once_in_order_through_error_replies(redis: RedisServer) -> None:
    """``maxmemory`` reached: every write gets OOM for a while (MISCONF and READONLY look
    the same to a client). Finals wait and are written when Redis takes them again."""
    async def full() -> None:
        redis.cli("CONFIG", "SET", "maxmemory", "1")

    async def freed() -> None:
        await asyncio.sleep(2.0)
        redis.cli("CONFIG", "SET", "maxmemory", "0")

    recent, frames = asyncio.run(_talk_through_a_fault(redis.url, full, freed))
    assert _finals(recent + frames) == list(range(11))


def test_every_final_once_in_order_through_a_stall_past_the_socket_timeout(
        redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis stops answering longer than the clients wait (SIGSTOP): writes time out and
    are made again, and one that had run is not appended twice."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "SOCKET_TIMEOUT_S", 1.0)

    async def stall() -> None:
        redis.pause()

    async def resume() -> None:
        await asyncio.sleep(2.5)
        redis.resume()

    recent, frames = asyncio.run(_talk_through_a_fault(redis.url, stall, resume))
    assert _finals(recent + frames) == list(range(11))


def test_every_final_once_in_order_through_a_redis_restart(redis: RedisServer) -> None:
    async def down() -> None:
        await asyncio.to_thread(redis.stop)

    async def up() -> None:
        await asyncio.sleep(1.0)
        await asyncio.to_thread(redis.start)

    recent, frames = asyncio.run(_talk_through_a_fault(redis.url, down, up))
    assert _finals(recent + frames) == list(range(11))


def test_a_reader_cancelled_as_its_read_times_out_stops(redis: RedisServer) -> None:
    """Python 3.11's ``asyncio.timeout`` turns a cancel that meets its expiry into a
    ``TimeoutError``, which redis-py reports as "Timeout reading": the reader took it for
    Redis being away, retried, and a replica's shutdown waited for it forever (a CI run
    hung 900 s so). That moment is forced here: the reader must stop, not read on."""
    from redis.exceptions import TimeoutError as RedisTimeout

    async def scenario() -> tuple[int, bool]:
        a, b, _, reg_b = await _started(redis.url)
        await _running(a, b, reg_b)
        real_xread, cancelled, reads_after = b._read_client.xread, [], []

        async def xread(*args, **kwargs):  # noqa: ANN202
            if cancelled:
                reads_after.append(1)
            try:
                return await real_xread(*args, **kwargs)
            except asyncio.CancelledError:
                cancelled.append(1)
                raise RedisTimeout("Timeout reading from redis") from None

        b._read_client.xread = xread
        await asyncio.sleep(0.6)  # the reader is in the patched read now
        reader = b.supervisor.tasks["room-bus-reader"]
        await a.close(1)
        await b.close(1)
        return len(reads_after), reader.done() and bool(cancelled)

    assert asyncio.run(scenario()) == (0, True)


def test_a_retried_write_is_appended_once(redis: RedisServer) -> None:
    """The same final written twice (a retry after a timeout that had in fact run) is in
    the stream once."""
    async def scenario() -> int:
        a, b, _, _ = await _started(redis.url)
        try:
            talk = _talk(ROOM, "a")
            await a.claim(talk)
            for _ in range(3):
                a.caption(talk, *_caption(0, True))
            assert await a.outbox.drain(5)
            entries = await a.client.xrange(a._finals(ROOM))
            return sum(1 for _, f in entries if f.get("k") == "caption")
        finally:
            await a.close(1)
            await b.close(1)

    assert asyncio.run(scenario()) == 1


FOREIGN = [
    {"x": "1"}, {"k": "caption"}, {"k": "start"}, {"k": "start", "info": "1"},
    {"k": "start", "info": "[]"}, {"k": "start", "info": "null"}, {"k": "start", "info": "{"},
    {"k": "start", "info": json.dumps({"room": 1})}, {"k": "end"}, {"k": "nonsense"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "x", "frame": "{}"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "99", "frame": "1"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "98", "frame": "null"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "97", "frame": "[1, 2]"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "96", "frame": "\"s\""},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "1e999", "frame": "{}"},
    {"k": "caption", "talk": "t1", "lang": "de", "segment": "95", "frame": "\udcff"},
    {"replica": "a", "k": "caption"}, {"k": "end", "talk": "someone else's"},
]


def test_foreign_entries_of_every_shape_are_skipped_and_counted(redis: RedisServer) -> None:
    """Anything another Redis client writes into a room's streams is data: skipped and
    counted, never the end of the reader (before, one such message silenced a replica)."""
    async def scenario() -> tuple[list[dict], int, int]:
        skipped: list[int] = []
        a, b, _, reg_b = await _started(redis.url, on_skipped=lambda: skipped.append(1))
        try:
            talk, viewer = await _running(a, b, reg_b)
            for fields in FOREIGN:
                clean = {k: v.encode("utf-8", "surrogateescape") for k, v in fields.items()}
                redis.cli("XADD", f"livetrans:finals:{ROOM}", "*",
                          *[x for kv in clean.items() for x in kv])
                redis.cli("XADD", f"livetrans:partials:{ROOM}", "*",
                          *[x for kv in clean.items() for x in kv])
                redis.cli("PUBLISH", f"livetrans:room:{ROOM}", json.dumps(fields))
            for seg in range(1, 4):
                a.caption(talk, *_caption(seg, True))
            frames = await _frames(viewer, until_final=3)
            return frames, len(skipped), sum(b.supervisor.restarts.values())
        finally:
            await a.close(1)
            await b.close(1)

    frames, skipped, restarts = asyncio.run(scenario())
    assert _finals(frames) == [1, 2, 3]
    assert skipped >= len(FOREIGN) and restarts == 0


def test_a_room_key_of_the_wrong_type_does_not_silence_other_rooms(
        redis: RedisServer) -> None:
    async def scenario() -> list[dict]:
        a, b, _, reg_b = await _started(redis.url)
        try:
            good, bad = _talk("good", "a"), _talk("bad", "a", "t2")
            await a.claim(good)
            await a.claim(bad)
            viewer, _ = await _watch(b, reg_b, "good")
            await _watch(b, reg_b, "bad")
            redis.cli("DEL", "livetrans:finals:bad")
            redis.cli("SET", "livetrans:finals:bad", "not a stream")
            for seg in range(3):
                a.caption(good, *_caption(seg, True))
            return await _frames(viewer, until_final=2)
        finally:
            await a.close(1)
            await b.close(1)

    assert _finals(asyncio.run(scenario())) == [0, 1, 2]


def test_redis_losing_its_data_mid_talk_neither_ends_it_nor_gives_the_room_away(
        volatile_redis: RedisServer) -> None:
    """A restart without persistence: the owner takes its room back and announces its
    talk again; the other replica's viewers are not sent ``ended`` meanwhile; a rival
    speaker's claim waits until the owner is back and is told the room is taken (not
    that the bus is away), rather than given the room mid-talk."""
    redis = volatile_redis

    async def scenario() -> tuple[list[dict], bool, str]:
        a, b, _, reg_b = await _started(redis.url, lease_s=1.5)
        try:
            talk, viewer = await _running(a, b, reg_b)
            await asyncio.to_thread(redis.stop)
            await asyncio.to_thread(redis.start)  # empty
            rival = "taken"
            try:
                await b.claim(_talk(ROOM, "b", "t2"))
                rival = "given"
            except BusUnavailable:
                rival = "wait"
            except RoomTakenOnBus:
                pass
            await asyncio.sleep(4.0)  # several leases: a dead owner's talk would end now
            for seg in range(1, 4):
                a.caption(talk, *_caption(seg, True))
            frames = await _frames(viewer, until_final=3)
            owner = await b.current_talk(ROOM)
            return frames, viewer.queue.closed, rival if owner.talk_id == "t1" else "lost"
        finally:
            await a.close(1)
            await b.close(1)

    frames, ended, rival = asyncio.run(scenario())
    assert not ended and _finals(frames) == [1, 2, 3]
    assert rival == "taken"  # the claim waited for the owner to come back, then was told


def test_a_dead_replicas_room_is_freed_by_its_lease(redis: RedisServer) -> None:
    async def scenario() -> tuple[bool, bool]:
        a, b, _, reg_b = await _started(redis.url, lease_s=1.0)
        talk = _talk(ROOM, "a")
        await a.claim(talk)
        assert await a.outbox.drain(5)
        viewer, _ = await _watch(b, reg_b)
        await asyncio.sleep(1.5)
        held = (await b.current_talk(ROOM)) is not None  # a renews: still a's
        await a.supervisor.stop()  # replica a dies: nothing renews, nothing releases
        await _until(lambda: viewer.queue.closed, 10)
        await b.claim(_talk(ROOM, "b", "t2"))
        await b.close(1)
        for client in (a.client, a._lease_client, a._read_client):
            await client.aclose()
        return held, viewer.queue.closed

    held, ended = asyncio.run(scenario())
    assert held and ended


def test_a_speaker_whose_room_was_taken_is_told(redis: RedisServer) -> None:
    async def scenario() -> list[tuple[str, str]]:
        a, b, reg_a, _ = await _started(redis.url, lease_s=1.0)
        lost: list[tuple[str, str]] = []
        reg_a.lease_lost = lambda room, talk: lost.append((room, talk))  # type: ignore
        try:
            await a.claim(_talk(ROOM, "a"))
            redis.cli("SET", f"livetrans:owner:{ROOM}",
                      json.dumps(_talk(ROOM, "b", "t2").as_dict()))
            await _until(lambda: bool(lost), 10)
            return lost
        finally:
            await a.close(1)
            await b.close(1)

    assert asyncio.run(scenario()) == [(ROOM, "t1")]


def test_a_rival_that_lost_the_race_leaves_the_winners_waiting_viewers_alone(
        redis: RedisServer) -> None:
    """Viewers on b wait for the room's talk; a's speaker wins the room, b's loses: b's
    viewers follow a's talk instead of getting ``ended`` from b's failed claim."""
    from app.rooms.talk import Talk

    async def scenario() -> tuple[bool, list[dict]]:
        a, b, reg_a, reg_b = await _started(redis.url)
        try:
            viewer, _ = await _watch(b, reg_b)
            winner = Talk(reg_a, object(), a, None, "a")
            loser = Talk(reg_b, object(), b, None, "b")
            await winner.open(ROOM, ["de"])
            with pytest.raises((RoomTakenOnBus, RoomTakenError)):
                await loser.open(ROOM, ["de"])
            a.caption(winner.info, *_caption(0, True))
            frames = await _frames(viewer, until_final=0)
            return viewer.queue.closed, frames
        finally:
            await a.close(1)
            await b.close(1)

    closed, frames = asyncio.run(scenario())
    assert not closed and _finals(frames) == [0]


@pytest.mark.parametrize("task", ["room-bus-reader", "room-bus-leases", "room-bus-outbox"])
def test_each_background_task_comes_back_after_a_bug(redis: RedisServer, task: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception injected once into a task: logged, counted, the task back within its
    backoff, and the talk's finals still reach the other replica."""
    from app import supervision

    monkeypatch.setattr(supervision, "BACKOFF_S", (0.05,))
    target = {"room-bus-reader": (RedisBus, "_deliver"),
              "room-bus-leases": (RedisBus, "_check_remote"),
              "room-bus-outbox": (outbox_module.Outbox, "_set_up")}[task]
    original = getattr(*target)
    fired = threading.Event()

    def once(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if not fired.is_set():
            fired.set()
            raise RuntimeError("injected")
        return original(*args, **kwargs)

    monkeypatch.setattr(*target, once)

    async def scenario() -> tuple[list[dict], dict[str, int], list[str]]:
        restarted: list[str] = []
        a, b, _, reg_b = await _started(redis.url, lease_s=1.0, on_restart=restarted.append)
        try:
            talk = _talk(ROOM, "a")
            await a.claim(talk)
            viewer, _ = await _watch(b, reg_b)
            a.caption(talk, *_caption(0, True))
            await _until(fired.is_set, 10)
            for seg in range(1, 3):
                a.caption(talk, *_caption(seg, True))
            frames = await _frames(viewer, until_final=2)
            restarts = {**a.supervisor.restarts, **b.supervisor.restarts}
            return frames, restarts, restarted
        finally:
            await a.close(1)
            await b.close(1)

    frames, restarts, restarted = asyncio.run(scenario())
    assert restarts.get(task) == 1 and restarted == [task]
    assert _finals(frames)[-1] == 2


def test_an_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")  # never started: nothing listens there
    with pytest.raises(BusUnavailable) as caught:
        probe(server.url, timeout=1.0)
    message = str(caught.value)
    assert "\n" not in message and f"127.0.0.1:{server.port}" in message


@pytest.fixture()
def sentinel(tmp_path: Path):
    """Debian's redis-sentinel watching a primary and its replica, ready to fail over."""
    with sentinel_watching_a_pair(tmp_path) as watcher:
        yield watcher


def test_every_final_once_in_order_through_a_sentinel_failover(sentinel) -> None:  # noqa: ANN001
    """The buses find the primary through Sentinel. A failover mid-talk costs seconds of
    frames and no final: kept writes wait for a replica's copy, and are made again on the
    new primary."""
    async def failover() -> None:
        await asyncio.to_thread(sentinel.failover)

    recent, frames = asyncio.run(_talk_through_a_fault(sentinel.url, failover, _nothing()))
    assert sentinel.primary() == sentinel.replica_port  # the failover happened
    assert _finals(recent + frames) == list(range(11))


def test_every_transcript_line_survives_a_sentinel_failover(sentinel) -> None:  # noqa: ANN001
    """Transcript lines on a Sentinel-managed primary are written until a replica has them:
    lines written around a failover are all in the transcript read from the new primary."""
    from app.rooms.redis_client import connect
    from app.rooms.transcripts.recorder import TranscriptRecorder
    from app.rooms.transcripts.redis_store import RedisTranscriptStore
    from app.rooms.transcripts.store import TalkRecord, TranscriptLine

    async def scenario() -> list[int]:
        client = connect(sentinel.url, max_connections=8)
        store = RedisTranscriptStore(client, replicated=True, own_client=True)
        recorder = TranscriptRecorder(store)
        await recorder.start()
        recorder.start_talk(TalkRecord(room=ROOM, talk_id="t1", started_at=time.time(),
                                       langs=("de",)))
        for seg in range(20):
            if seg == 5:
                await asyncio.to_thread(sentinel.failover)
            recorder.line(ROOM, "t1", "de", TranscriptLine(segment=seg, start_s=seg,
                                                           end_s=seg + 1, source="s",
                                                           text=f"x{seg}"))
            await asyncio.sleep(0.1)
        await asyncio.wait_for(recorder.written(), 60)
        lines = await store.lines(ROOM, "t1", "de")
        await recorder.close(1)
        return [line.segment for line in lines]

    segments = asyncio.run(scenario())
    assert sentinel.primary() == sentinel.replica_port
    assert segments == list(range(20))


def test_viewers_joining_right_after_redis_dropped_every_connection_are_not_refused(
        redis: RedisServer) -> None:
    """A pooled connection Redis closed fails at its next use; a lookup tries again on a
    new one instead of refusing the viewer (bench-bus found 28 of 100 joins refused)."""
    async def scenario() -> int:
        bus = RedisBus(redis.url, "a")
        await bus.start(RoomRegistry())
        try:
            await bus.claim(_talk(ROOM, "a"))
            await bus.claim(_talk(ROOM, "a"))  # a retried claim of our own room: still ours
            await asyncio.gather(*(bus.current_talk(ROOM) for _ in range(60)))  # a full pool
            redis.cli("CLIENT", "KILL", "TYPE", "normal")
            found = await asyncio.gather(*(bus.current_talk(ROOM) for _ in range(100)),
                                         return_exceptions=True)
            return sum(isinstance(t, TalkInfo) for t in found)
        finally:
            await bus.close(1)

    assert asyncio.run(scenario()) == 100


def test_a_primary_killed_mid_talk_costs_seconds_not_the_replica_patience(
        sentinel, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The primary dies (SIGKILL) and Sentinel promotes its replica, which then has no
    replica of its own: kept writes are made on it at once (nothing is left to confirm a
    copy) instead of each waiting the whole patience for a replica that no longer exists.
    With a patience of ten minutes, the talk's finals can only arrive within the test's
    minute if no write waits for it; every final comes once, in order, and no ``ended``."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "REPLICATION_PATIENCE_S", 600.0)
    killed = sentinel.primary()

    async def die() -> None:
        primary = sentinel.servers[killed]
        await asyncio.to_thread(primary.kill)

    async def promoted() -> None:
        deadline = time.monotonic() + 60
        while sentinel.primary() == killed:
            assert time.monotonic() < deadline, "Sentinel did not promote the replica"
            await asyncio.sleep(0.2)

    recent, frames = asyncio.run(_talk_through_a_fault(sentinel.url, die, promoted))
    assert sentinel.primary() == sentinel.replica_port
    assert _finals(recent + frames) == list(range(11))
    assert not any(f.get("type") == "ended" for f in frames)


def test_a_stall_past_the_lease_with_a_rival_claim_keeps_the_running_talk(
        redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis stands still (SIGSTOP) for two leases while a rival speaker on the other
    replica claims the room: leases run out on Redis's clock that nobody could renew. The
    talk keeps its room (the rival is refused, told to retry or that it is taken), its
    viewers get every final and no ``ended``, its speaker is not told it lost the room, and
    a viewer who joins afterwards follows it."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "SOCKET_TIMEOUT_S", 1.0)

    async def scenario() -> tuple[list[dict], bool, str, str, list, list[dict]]:
        a, b, reg_a, reg_b = await _started(redis.url, lease_s=1.5)
        lost: list[tuple[str, str]] = []
        reg_a.lease_lost = lambda room, talk: lost.append((room, talk))  # type: ignore
        c = RedisBus(redis.url, "c", lease_s=1.5)
        reg_c = RoomRegistry()
        await c.start(reg_c)
        try:
            talk, viewer = await _running(a, b, reg_b)
            redis.pause()
            rival = asyncio.create_task(b.claim(_talk(ROOM, "b", "t2")))
            a.caption(talk, *_caption(1, True))
            await asyncio.sleep(3.0)  # two leases on Redis's clock
            redis.resume()
            try:
                await rival
                outcome = "given"
            except BusUnavailable:
                outcome = "retry"
            except RoomTakenOnBus:
                outcome = "taken"
            await asyncio.sleep(3.0)  # two more leases: an early end would show now
            for seg in range(2, 5):
                a.caption(talk, *_caption(seg, True))
            frames = await _frames(viewer, until_final=4)
            owner = await c.current_talk(ROOM)
            late, recent = await _watch(c, reg_c)
            a.caption(talk, *_caption(5, True))
            later = await _frames(late, until_final=5)
            return (frames, viewer.queue.closed, outcome, owner.talk_id, lost,
                    recent + later)
        finally:
            redis.resume()
            await a.close(1)
            await b.close(1)
            await c.close(1)

    frames, ended, outcome, owner, lost, late = asyncio.run(scenario())
    assert outcome in ("retry", "taken") and owner == "t1" and lost == []
    assert not ended and _finals(frames) == [1, 2, 3, 4]
    assert _finals(late) == [0, 1, 2, 3, 4, 5]


class SlowReplies:
    """A TCP hop between the bus and Redis whose replies can be held up (a congested
    network): commands reach Redis and run at once, their answers come ``delay_s`` late."""

    def __init__(self, port: int) -> None:
        self.target, self.delay_s = port, 0.0
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, client_r: asyncio.StreamReader,
                     client_w: asyncio.StreamWriter) -> None:
        redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.target)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                       held: bool) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    if held and self.delay_s:
                        await asyncio.sleep(self.delay_s)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError):
                dst.close()

        await asyncio.gather(pump(client_r, redis_w, False), pump(redis_r, client_w, True))


def test_a_claim_whose_answer_never_came_does_not_hold_the_room(
        redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim runs in Redis but its answer comes after the client stopped waiting: the
    speaker is told to retry, and the claim is released (in the outbox), so it does not
    hold the room for a lease; the speaker's retry gets the room."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "SOCKET_TIMEOUT_S", 1.0)

    async def scenario() -> tuple[str, str | None, str | None, str]:
        hop = SlowReplies(redis.port)
        await hop.start()
        bus = RedisBus(hop.url, "a", lease_s=30.0)
        await bus.start(RoomRegistry())
        try:
            await bus.claim(_talk("warm-up", "a", "t0"))  # the script is loaded: one call
            hop.delay_s = 2.0
            try:
                await bus.claim(_talk(ROOM, "a", "t1"))
                first = "given"
            except BusUnavailable:
                first = "retry"
            held = redis.cli("GET", f"livetrans:owner:{ROOM}")  # it ran
            hop.delay_s = 0.0
            assert await bus.outbox.drain(20)
            left = redis.cli("GET", f"livetrans:owner:{ROOM}")
            await bus.claim(_talk(ROOM, "a", "t2"))
            return first, held, left, (await bus.current_talk(ROOM)).talk_id
        finally:
            await bus.close(1)
            await hop.close()

    first, held, left, owner = asyncio.run(scenario())
    assert first == "retry" and held is not None and json.loads(held)["talk"] == "t1"
    assert left is None and owner == "t2"


def test_a_late_end_of_an_old_talk_does_not_hide_the_running_one(redis: RedisServer) -> None:
    """A replica that lost its lease flushes its old talk's ``end`` after the room's new
    talk started: a viewer joining then still follows the new talk, its finals so far
    first."""
    async def scenario() -> tuple[list[dict], list[dict], bool]:
        a, b, _, reg_b = await _started(redis.url)
        try:
            talk = _talk(ROOM, "a", "t2")
            await a.claim(talk)
            a.caption(talk, *_caption(0, True))
            assert await a.outbox.drain(5)
            redis.cli("XADD", f"livetrans:finals:{ROOM}", "*", "k", "end", "talk", "t1",
                      "replica", "old#1")
            viewer, recent = await _watch(b, reg_b)
            a.caption(talk, *_caption(1, True))
            frames = await _frames(viewer, until_final=1)
            return recent, frames, viewer.queue.closed
        finally:
            await a.close(1)
            await b.close(1)

    recent, frames, closed = asyncio.run(scenario())
    assert _finals(recent) == [0] and _finals(frames) == [1] and not closed


def test_a_viewer_joins_a_talk_whose_start_was_trimmed_away(redis: RedisServer) -> None:
    """An all-day talk: ``MAXLEN`` cut its start from the stream. A viewer joining on the
    other replica follows it all the same (languages from the owner's record of the talk),
    with the finals still in the stream, then the next ones."""
    async def scenario() -> tuple[list[dict], list[dict], tuple[str, ...]]:
        a, b, _, reg_b = await _started(redis.url)
        try:
            talk = _talk(ROOM, "a")
            await a.claim(talk)
            for seg in range(6):
                a.caption(talk, *_caption(seg, True))
            assert await a.outbox.drain(5)
            redis.cli("XTRIM", f"livetrans:finals:{ROOM}", "MAXLEN", "3")
            viewer, recent = await _watch(b, reg_b)
            a.caption(talk, *_caption(6, True))
            frames = await _frames(viewer, until_final=6)
            return recent, frames, tuple(reg_b.rooms[ROOM].langs)
        finally:
            await a.close(1)
            await b.close(1)

    recent, frames, langs = asyncio.run(scenario())
    assert _finals(recent) == [3, 4, 5] and _finals(frames) == [6] and langs == ("de",)


def test_finals_held_up_behind_a_talks_end_reach_viewers_before_ended(
        redis: RedisServer) -> None:
    """The speaker's replica cannot append to the stream for longer than the lease
    (``NOPERM`` from an ACL being fixed: its writes wait in the outbox) while its talk
    ends. The room stays the talk's until its last finals and its end are written, so the
    other replica's viewer gets them all, then ``ended``, not ``ended`` first."""
    async def scenario() -> tuple[list[dict], bool, bool]:
        a, b, _, reg_b = await _started(redis.url, lease_s=1.0)
        try:
            talk, viewer = await _running(a, b, reg_b)
            redis.cli("ACL", "SETUSER", "default", "-xadd")
            for seg in range(1, 4):
                a.caption(talk, *_caption(seg, True))
            a.release(talk)
            await asyncio.sleep(3.0)  # three leases
            early = viewer.queue.closed
            redis.cli("ACL", "SETUSER", "default", "+xadd")
            frames = await _frames(viewer, until_final=3)
            await _until(lambda: viewer.queue.closed, 10)
            return frames, early, viewer.queue.closed
        finally:
            redis.cli("ACL", "SETUSER", "default", "+xadd")
            await a.close(1)
            await b.close(1)

    frames, early, ended = asyncio.run(scenario())
    assert not early and _finals(frames) == [1, 2, 3] and ended


def test_the_lease_check_hands_on_a_talks_last_finals_before_ending_it(
        redis: RedisServer) -> None:
    """The room's next talk started while this replica's reader was still a read behind:
    the lease check, which sees the owner changed, hands the old talk's last finals to its
    viewer before ``ended``; the reader, catching up later, repeats none of them."""
    async def scenario() -> tuple[list[dict], list[dict]]:
        a, b, _, reg_b = await _started(redis.url, lease_s=1.0)
        try:
            talk, viewer = await _running(a, b, reg_b)
            reader = b.supervisor.tasks["room-bus-reader"]
            reader.cancel()  # the reader falls behind: only the lease check reads on
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            for seg in range(1, 4):
                a.caption(talk, *_caption(seg, True))
            await a.release(talk)
            await a.claim(_talk(ROOM, "a", "t2"))
            frames = await _frames(viewer, until_final=3)
            await _until(lambda: viewer.queue.closed, 10)
            await b._catch_up(ROOM)  # the reader's late read: nothing again
            late = [json.loads(f.text) for f in viewer.queue.frames]
            return frames, late
        finally:
            await a.close(1)
            await b.close(1)

    frames, late = asyncio.run(scenario())
    assert _finals(frames) == [1, 2, 3] and _finals(late) == []


def test_many_talks_in_a_row_in_one_room_are_never_refused(redis: RedisServer) -> None:
    """A room used all day: 205 talks one after another on one replica while a crowd
    downloads transcripts from the same replica (the store shares the bus's pool), and a
    viewer on the other replica. Each talk gets the room (the last one's release lands
    before ``finish`` returns), its finals reach the viewer once, and no download fails."""
    from app.rooms.talk import Talk
    from app.rooms.transcripts.redis_store import RedisTranscriptStore

    async def scenario() -> tuple[int, list[int], int, int]:
        a, b, reg_a, reg_b = await _started(redis.url)
        store = RedisTranscriptStore(a.client)
        refused, ok, failed = 0, 0, 0
        got: list[int] = []
        try:
            for n in range(205):
                talk = Talk(reg_a, object(), a, None, "a")
                crowd = [asyncio.ensure_future(store.lines(ROOM, "t1", "de"))
                         for _ in range(40)]
                try:
                    await talk.open(ROOM, ["de"])
                except (BusUnavailable, RoomTakenOnBus, RoomTakenError):
                    refused += 1
                    continue
                finally:
                    answers = await asyncio.gather(*crowd, return_exceptions=True)
                    failed += sum(isinstance(x, BaseException) for x in answers)
                viewer, _ = await _watch(b, reg_b)
                a.caption(talk.info, *_caption(n, True))
                got += _finals(await _frames(viewer, until_final=n))
                await talk.finish()
                reg_b.leave(viewer)
                ok += 1
            return refused, got, ok, failed
        finally:
            await a.close(1)
            await b.close(1)

    refused, got, ok, failed = asyncio.run(scenario())
    assert refused == 0 and failed == 0 and ok == 205 and got == list(range(205))


def test_a_renewal_crossing_a_release_does_not_take_the_room_again(
        redis: RedisServer) -> None:
    """The lease keeper renews a talk whose release has just landed (the release's answer
    and the renewal crossed): the room stays free for the next speaker, on any replica."""
    async def scenario() -> tuple[object, str]:
        a, b, _, _ = await _started(redis.url)
        try:
            talk = _talk(ROOM, "a")
            await a.claim(talk)
            lease = a.owned[ROOM]
            await a.release(talk)
            a.owned[ROOM] = lease  # as if the renewal had read the list just before
            await a._renew_owned()
            left = redis.cli("GET", f"livetrans:owner:{ROOM}")
            await b.claim(_talk(ROOM, "b", "t2"))
            return left, (await b.current_talk(ROOM)).talk_id
        finally:
            await a.close(1)
            await b.close(1)

    left, owner = asyncio.run(scenario())
    assert left is None and owner == "t2"
