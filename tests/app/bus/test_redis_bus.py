"""The Redis room bus against Debian's redis-server on loopback: two "replicas" (two buses,
two room registries, one event loop; no model) sharing rooms. One speaker per room across
replicas, frames and recent finals to the other replica's viewers, a dead replica's rooms
freed by its lease, and an outage that loses no final."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app import outbox as outbox_module
from app.api.rooms import RoomRegistry
from app.bus import redis_bus as redis_bus_module
from app.bus.base import BusUnavailable, RoomTakenOnBus, TalkInfo
from app.bus.redis_bus import RedisBus, probe
from tests.redis_server import RedisServer, redis_server

BOUNDS = {"max_viewers": 9, "max_per_room": 9}


def _talk(room: str, replica: str, talk_id: str = "t1") -> TalkInfo:
    return TalkInfo(room=room, talk_id=talk_id, replica=replica, langs=("de",),
                    started_at=1.0)


def _caption(segment: int, final: bool, text: str = "x") -> tuple[dict, str]:
    payload = {"type": "caption", "segment": segment, "lang": "de", "final": final,
               "text": f"{text}{segment}", "source": "s"}
    return payload, json.dumps(payload)


async def _frames(viewer, until_final: int, timeout: float = 10.0) -> list[dict]:
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


@pytest.fixture()
def redis(tmp_path: Path):
    # persisted, as docker/compose.yaml runs it: an outage is a restart, not a wipe
    with redis_server(tmp_path / "redis", persist=True) as server:
        yield server


def _pair(url: str, lease_s: float = 10.0) -> tuple[RedisBus, RedisBus, RoomRegistry,
                                                    RoomRegistry]:
    return (RedisBus(url, "a", lease_s=lease_s), RedisBus(url, "b", lease_s=lease_s),
            RoomRegistry(), RoomRegistry())


def test_one_speaker_per_room_across_replicas(redis: RedisServer) -> None:
    async def scenario() -> None:
        a, b, reg_a, reg_b = _pair(redis.url)
        await a.start(reg_a)
        await b.start(reg_b)
        try:
            await a.claim(_talk("keynote", "a"))
            with pytest.raises(RoomTakenOnBus):
                await b.claim(_talk("keynote", "b", "t2"))
            assert (await b.current_talk("keynote")).talk_id == "t1"
            a.release(_talk("keynote", "a"))
            assert await a.outbox.drain(5)
            assert await b.current_talk("keynote") is None
            await b.claim(_talk("keynote", "b", "t2"))  # free again
        finally:
            await a.close(1)
            await b.close(1)

    asyncio.run(scenario())


def test_a_join_storm_shares_a_bounded_pool_of_connections(redis: RedisServer) -> None:
    """Hundreds of viewers joining at once look the room up on Redis together: they wait
    for one of ``MAX_CONNECTIONS`` connections rather than each opening its own (which
    refused viewers with room_bus_unavailable in bench-bus with 500 viewers)."""
    async def scenario() -> tuple[int, int]:
        bus, registry = RedisBus(redis.url, "a"), RoomRegistry()
        await bus.start(registry)
        try:
            await bus.claim(_talk("keynote", "a"))
            found = await asyncio.gather(*(bus.current_talk("keynote") for _ in range(400)))
            clients = await bus.client.client_list()
            return sum(t is not None and t.talk_id == "t1" for t in found), len(clients)
        finally:
            await bus.close(1)

    found, clients = asyncio.run(scenario())
    assert found == 400
    assert clients <= redis_bus_module.MAX_CONNECTIONS


def test_frames_reach_the_other_replicas_viewers_once_and_in_order(redis: RedisServer) -> None:
    async def scenario() -> tuple[list[dict], list[dict], list[dict]]:
        a, b, reg_a, reg_b = _pair(redis.url)
        await a.start(reg_a)
        await b.start(reg_b)
        try:
            talk = _talk("keynote", "a")
            await a.claim(talk)
            for seg in range(3):  # before anyone on b watches
                a.caption(talk, *_caption(seg, True))
            assert await a.outbox.drain(5)
            # a viewer on b: follow the remote talk, then read the recent finals
            current = await b.current_talk("keynote")
            reg_b.remote_start("keynote", current.talk_id, current.replica,
                               list(current.langs), current.started_at, create=True)
            viewer, _ = reg_b.join("keynote", "de", **BOUNDS)
            recent = await b.recent(current, "de")
            for seg in range(3, 6):
                a.caption(talk, *_caption(seg, False))
                a.caption(talk, *_caption(seg, True))
            live = await _frames(viewer, until_final=5)
            a.release(talk)
            assert await a.outbox.drain(5)
            for _ in range(200):
                if viewer.queue.closed:
                    break
                await asyncio.sleep(0.01)
            return recent, live, [json.loads(f.text) for f in viewer.queue.frames]
        finally:
            await a.close(1)
            await b.close(1)

    recent, live, rest = asyncio.run(scenario())
    assert [f["segment"] for f in recent] == [0, 1, 2]
    finals = [f["segment"] for f in live if f["final"]]
    assert finals == [3, 4, 5]  # the remote replica's frames, once each, in order
    assert rest == []


def test_a_dead_replicas_room_is_freed_by_its_lease(redis: RedisServer) -> None:
    async def scenario() -> tuple[bool, bool]:
        a, b, reg_a, reg_b = _pair(redis.url, lease_s=1.0)
        await a.start(reg_a)
        await b.start(reg_b)
        talk = _talk("keynote", "a")
        await a.claim(talk)
        reg_b.remote_start("keynote", "t1", "a", ["de"], 1.0, create=True)
        viewer, _ = reg_b.join("keynote", "de", **BOUNDS)
        await asyncio.sleep(1.5)
        held = (await b.current_talk("keynote")) is not None  # a renews: still a's
        for task in a._tasks:  # replica a dies: nothing renews, nothing releases
            task.cancel()
        await asyncio.sleep(2.0)
        ended = viewer.queue.closed  # b noticed the lease ran out and ended the talk
        await b.claim(_talk("keynote", "b", "t2"))
        await b.close(1)
        await a.client.aclose()
        return held, ended

    held, ended = asyncio.run(scenario())
    assert held and ended


def test_an_outage_loses_frames_for_others_but_no_final(redis: RedisServer,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox_module, "RETRY_S", (0.05, 0.1))

    async def scenario() -> list[dict]:
        a, b, reg_a, reg_b = _pair(redis.url)
        states: list[bool] = []
        a.outbox._on_up = states.append
        await a.start(reg_a)
        await b.start(reg_b)
        talk = _talk("keynote", "a")
        await a.claim(talk)
        a.caption(talk, *_caption(0, True))
        assert await a.outbox.drain(5)
        redis.stop()
        for seg in range(1, 4):
            a.caption(talk, *_caption(seg, False))  # dropped while Redis is away
            a.caption(talk, *_caption(seg, True))  # kept
        await asyncio.sleep(0.5)
        assert states == [False] and a.outbox.kept == 3
        redis.start()
        assert await a.outbox.drain(15)
        recent = await b.recent(talk, "de")
        await a.close(1)
        await b.close(1)
        return recent

    recent = asyncio.run(scenario())
    assert [f["segment"] for f in recent] == [0, 1, 2, 3]
    assert all(f["final"] for f in recent)


def test_an_unreachable_redis_is_one_line(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")  # never started: nothing listens there
    with pytest.raises(BusUnavailable) as caught:
        probe(server.url, timeout=1.0)
    message = str(caught.value)
    assert "\n" not in message and f"127.0.0.1:{server.port}" in message
