"""Rooms across two real replicas (two servers with the real model) on Debian's
redis-server: a speaker on one, viewers on both, every final once and in order on each;
one speaker per room across replicas; a viewer token for one talk only; the transcript
from either replica, also after both restart; Redis lost mid-talk loses no final."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from pathlib import Path

import httpx
import pytest
import websockets

from tests.conftest import LiveServer
from tests.redis_server import RedisServer, redis_server, sentinel_watching_a_pair
from tests.server_process import serve_process

SENTENCES = ["Good morning everyone.", "Thank you for coming.", "Let us begin.",
             "The first slide shows the plan.", "Questions come at the end."]


def _ws(server, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def _room() -> str:
    return "bus-" + uuid.uuid4().hex[:10]


def _finals(frames: list[dict]) -> list[dict]:
    return [f for f in frames if f.get("type") == "caption" and f.get("final")]


async def _watch(url: str, frames: list[dict], limit: float = 300) -> None:
    async with asyncio.timeout(limit), websockets.connect(url, max_size=None) as ws:
        try:
            async for raw in ws:
                frames.append(json.loads(raw))
        except websockets.ConnectionClosed:
            pass


async def _joined(frames: list[dict]) -> None:
    while not frames:
        await asyncio.sleep(0.01)


async def _speak(ws, segment: int, text: str) -> None:  # noqa: ANN001
    words = text.split()
    await ws.send(json.dumps({"type": "partial", "segment": segment,
                              "text": " ".join(words[:2])}))
    await ws.send(json.dumps({"type": "final", "segment": segment, "text": text}))


async def _until_finals(ws, frames: list[dict], n: int) -> None:  # noqa: ANN001
    async with asyncio.timeout(300):
        while len(_finals(frames)) < n:
            frames.append(json.loads(await ws.recv()))


@pytest.fixture()
def redis(tmp_path: Path):
    # persisted, as docker/compose.yaml runs it: an outage is a restart, not a wipe
    with redis_server(tmp_path / "redis", persist=True) as server:
        yield server


def _replicas(redis: RedisServer, **settings):  # noqa: ANN202
    common = {"room_bus": redis.url, "parallel": 2, **settings}
    return LiveServer(replica_id="a", **common), LiveServer(replica_id="b", **common)


def test_viewers_on_both_replicas_see_every_final_once_in_order(redis: RedisServer) -> None:
    room = _room()
    a, b = _replicas(redis, api_keys=["k"])
    with a, b:
        async def main() -> tuple[dict, list[dict], list[dict], list[dict], dict, int]:
            spoken: list[dict] = []
            on_a: list[dict] = []
            on_b: list[dict] = []
            async with websockets.connect(_ws(a, "/v1/live"),
                                          additional_headers={"Authorization": "Bearer k"},
                                          max_size=None) as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room, "drafters": []}))
                ready = json.loads(await ws.recv())
                token = ready["viewer_token"]
                watch = f"/v1/live/watch?room={room}&lang=de&token={token}"
                # a viewer on each replica; b's joins after two finals (it gets them in
                # ``recent``), a's from the start
                viewer_a = asyncio.create_task(_watch(_ws(a, watch), on_a))
                await asyncio.wait_for(_joined(on_a), 60)
                for seg, text in enumerate(SENTENCES[:2]):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, 2)
                viewer_b = asyncio.create_task(_watch(_ws(b, watch), on_b))
                await asyncio.wait_for(_joined(on_b), 60)
                # a second speaker for the room on the other replica: refused
                async with websockets.connect(
                        _ws(b, "/v1/live"), additional_headers={"Authorization": "Bearer k"},
                        max_size=None) as rival:
                    await rival.send(json.dumps({"type": "start", "target_lang": "de",
                                                 "room": room}))
                    refused = json.loads(await rival.recv())
                for seg, text in enumerate(SENTENCES[2:], start=2):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, len(SENTENCES))
                await ws.send(json.dumps({"type": "stop"}))
                async with asyncio.timeout(60):
                    while spoken[-1].get("type") != "done":
                        spoken.append(json.loads(await ws.recv()))
            await asyncio.wait_for(asyncio.gather(viewer_a, viewer_b), 60)
            # the same transcript from either replica
            transcripts = []
            for server in (a, b):
                r = httpx.get(f"{server.url}/v1/rooms/{room}/transcript",
                              params={"lang": "de", "format": "json", "token": token},
                              timeout=30)
                assert r.status_code == 200, r.text
                transcripts.append(r.json())
            assert transcripts[0] == transcripts[1]
            return ready, spoken, on_a, on_b, transcripts[0], refused

        ready, spoken, on_a, on_b, transcript, refused = asyncio.run(main())
    assert refused["type"] == "error" and refused["code"] == "room_taken"
    said = [(f["segment"], f["text"]) for f in _finals(spoken)]
    assert [s for s, _ in said] == list(range(len(SENTENCES)))
    for frames in (on_a, on_b):
        joined = frames[0]
        assert joined["type"] == "joined" and frames[-1]["type"] == "ended"
        seen = [(f["segment"], f["text"]) for f in _finals(joined["recent"] + frames[1:])]
        assert seen == said  # every final once, in order, the speaker's own text
    assert len(on_b[0]["recent"]) >= 2  # b joined late: the finals before it came in recent
    lines = transcript["lines"]
    assert [(x["segment"], x["text"]) for x in lines] == said
    assert all(0 <= x["start"] <= x["end"] for x in lines)
    assert [x["source"] for x in lines] == SENTENCES


def test_a_token_admits_to_its_talk_only_and_transcripts_survive_a_restart(
        redis: RedisServer) -> None:
    room = _room()

    async def one_talk(server, text: str) -> dict:  # noqa: ANN001
        spoken: list[dict] = []
        async with websockets.connect(_ws(server, "/v1/live"),
                                      additional_headers={"Authorization": "Bearer k"},
                                      max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room,
                                      "drafters": []}))
            ready = json.loads(await ws.recv())
            assert ready["type"] == "ready", ready  # the room is free the moment 'done' came
            await _speak(ws, 0, text)
            await _until_finals(ws, spoken, 1)
            await ws.send(json.dumps({"type": "stop"}))
            async with asyncio.timeout(60):
                while not spoken or spoken[-1].get("type") != "done":
                    spoken.append(json.loads(await ws.recv()))
        return ready

    a, b = _replicas(redis, api_keys=["k"])
    with a, b:
        first = asyncio.run(one_talk(a, SENTENCES[0]))
        second = asyncio.run(one_talk(b, SENTENCES[1]))
    assert first["talk"] != second["talk"]
    a2, b2 = _replicas(redis, api_keys=["k"])  # both replicas restarted; Redis kept it
    with a2, b2:
        url = f"{b2.url}/v1/rooms/{room}/transcript"
        old = httpx.get(url, params={"lang": "de", "format": "json",
                                     "token": first["viewer_token"]}, timeout=30)
        new = httpx.get(url, params={"lang": "de", "format": "json",
                                     "token": second["viewer_token"]}, timeout=30)
        nobody = httpx.get(url, params={"lang": "de", "format": "json", "token": "0" * 32},
                           timeout=30)
        vtt = httpx.get(f"{a2.url}/v1/rooms/{room}/transcript",
                        params={"lang": "de", "token": second["viewer_token"]}, timeout=30)

        async def late_viewer() -> list[dict]:
            frames: list[dict] = []
            # the first talk's token does not admit to a later talk in the room
            watch = f"/v1/live/watch?room={room}&lang=de&token={first['viewer_token']}"
            await _watch(_ws(a2, watch), frames, limit=30)
            return frames

        refused = asyncio.run(late_viewer())
    assert old.status_code == 200 and new.status_code == 200, (old.text, new.text)
    assert [x["source"] for x in old.json()["lines"]] == [SENTENCES[0]]
    assert [x["source"] for x in new.json()["lines"]] == [SENTENCES[1]]
    assert nobody.status_code == 401
    assert vtt.status_code == 200 and vtt.text.startswith("WEBVTT")
    assert refused and refused[0]["type"] == "error" and refused[0]["code"] == "invalid_token"


def _kill_connections(redis: RedisServer) -> None:
    redis.cli("CLIENT", "KILL", "TYPE", "normal")
    redis.cli("CLIENT", "KILL", "TYPE", "pubsub")


def _foreign(redis: RedisServer, room: str) -> None:
    """What another client of the same Redis could write on a room's keys: every JSON
    shape, in every stream and on the old pub/sub channel."""
    for junk in ("1", "null", "[]", "\"s\"", "{}", '{"k": "caption"}', '{"k": "start"}',
                 '{"k": "end", "talk": 1}', "{", "\u00ff"):
        for key in (f"livetrans:finals:{room}", f"livetrans:partials:{room}"):
            redis.cli("XADD", key, "*", "k", junk, "talk", junk, "frame", junk, "info", junk,
                      "lang", "de", "segment", junk)
        redis.cli("PUBLISH", f"livetrans:room:{room}", junk)


FAULTS = {
    # name: (inject, heal), each called mid-talk from the test's thread
    "connections killed": (_kill_connections, lambda redis: _kill_connections(redis)),
    "error replies (maxmemory)": (lambda redis: redis.cli("CONFIG", "SET", "maxmemory", "1"),
                                  lambda redis: redis.cli("CONFIG", "SET", "maxmemory", "0")),
    "stalled past the socket timeout": (lambda redis: redis.pause(),
                                        lambda redis: redis.resume()),
    "restarted": (lambda redis: redis.stop(), lambda redis: redis.start()),
}


@pytest.mark.parametrize("fault", [*FAULTS, "foreign messages"])
def test_through_a_redis_fault_every_final_reaches_every_viewer_once_in_order(
        redis: RedisServer, fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mid-talk, one fault of Redis's ordinary life; a viewer on each replica. Every final
    reaches both viewers once and in order, and the transcript; the speaker hears 'done'."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "SOCKET_TIMEOUT_S", 1.5)  # the stall outlasts it
    room = _room()
    a, b = _replicas(redis)
    inject, heal = FAULTS.get(fault, (lambda redis: _foreign(redis, room),
                                      lambda redis: _foreign(redis, room)))
    with a, b:
        async def main() -> tuple[list[dict], list[dict], list[dict], dict]:
            spoken: list[dict] = []
            on_a: list[dict] = []
            on_b: list[dict] = []
            async with websockets.connect(_ws(a, "/v1/live"), max_size=None) as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room, "drafters": []}))
                assert json.loads(await ws.recv())["type"] == "ready"
                watch = f"/v1/live/watch?room={room}&lang=de"
                viewers = [asyncio.create_task(_watch(_ws(a, watch), on_a)),
                           asyncio.create_task(_watch(_ws(b, watch), on_b))]
                await asyncio.wait_for(asyncio.gather(_joined(on_a), _joined(on_b)), 60)
                await _speak(ws, 0, SENTENCES[0])
                await _until_finals(ws, spoken, 1)
                await asyncio.to_thread(inject, redis)
                for seg, text in enumerate(SENTENCES[1:3], start=1):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, 3)  # the speaker's own captions go on
                await asyncio.sleep(2.0)  # the fault lasts a while
                await asyncio.to_thread(heal, redis)
                for seg, text in enumerate(SENTENCES[3:], start=3):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, len(SENTENCES))
                await ws.send(json.dumps({"type": "stop"}))
                async with asyncio.timeout(60):
                    while spoken[-1].get("type") != "done":
                        spoken.append(json.loads(await ws.recv()))
            await asyncio.wait_for(asyncio.gather(*viewers), 90)
            async with asyncio.timeout(60):  # finals that waited reach the transcript
                while True:
                    r = httpx.get(f"{b.url}/v1/rooms/{room}/transcript",
                                  params={"lang": "de", "format": "json"}, timeout=30)
                    if r.status_code == 200 and len(r.json()["lines"]) == len(SENTENCES):
                        return spoken, on_a, on_b, r.json()
                    await asyncio.sleep(0.2)

        spoken, on_a, on_b, transcript = asyncio.run(main())
    said = [(f["segment"], f["text"]) for f in _finals(spoken)]
    assert [s for s, _ in said] == list(range(len(SENTENCES)))
    assert [(x["segment"], x["text"]) for x in transcript["lines"]] == said
    for frames in (on_a, on_b):
        assert frames[0]["type"] == "joined" and frames[-1]["type"] == "ended"
        seen = [(f["segment"], f["text"]) for f in _finals(frames[0]["recent"] + frames[1:])]
        assert seen == said  # every final once, in order, on each replica


def test_a_replica_killed_mid_talk_frees_its_room_and_the_speaker_goes_on_elsewhere(
        redis: RedisServer, tmp_path: Path) -> None:
    """SIGKILL of the speaker's replica (a separate process): its viewers on the other
    replica get the finals it had sent, then ``ended`` once the lease runs out; the
    speaker reconnects to the other replica and goes on in the same room (a new talk)."""
    env = {**os.environ, "LIVETRANS_DATA_DIR": str(tmp_path / "data-a")}
    room = _room()
    with serve_process("--room-bus", redis.url, "--replica-id", "a", "--room-lease-s", "2",
                       env=env) as (proc, port):
        with LiveServer(replica_id="b", room_bus=redis.url, room_lease_s=2) as b:
            async def main() -> tuple[list[dict], list[dict], list[dict], list[dict]]:
                first: list[dict] = []
                second: list[dict] = []
                watched: list[dict] = []
                rewatched: list[dict] = []
                watch = f"/v1/live/watch?room={room}&lang=de"
                async with websockets.connect(f"ws://127.0.0.1:{port}/v1/live",
                                              max_size=None) as ws:
                    await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                              "room": room, "drafters": []}))
                    assert json.loads(await ws.recv())["type"] == "ready"
                    viewer = asyncio.create_task(_watch(_ws(b, watch), watched))
                    await asyncio.wait_for(_joined(watched), 60)
                    for seg, text in enumerate(SENTENCES[:2]):
                        await _speak(ws, seg, text)
                    await _until_finals(ws, first, 2)
                    while len(_finals(watched)) < 2:  # b's viewer has them too
                        await asyncio.sleep(0.05)
                    proc.kill()  # mid-talk, no goodbye
                    with contextlib.suppress(websockets.ConnectionClosed):
                        await ws.recv()
                await asyncio.wait_for(viewer, 60)  # 'ended' once the lease ran out
                async with websockets.connect(_ws(b, "/v1/live"), max_size=None) as ws:
                    async with asyncio.timeout(60):  # the room is free within a lease
                        while True:
                            await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                                      "room": room, "drafters": []}))
                            reply = json.loads(await ws.recv())
                            if reply["type"] == "ready":
                                break
                            assert reply.get("code") == "room_taken", reply
                            await asyncio.sleep(0.5)
                    again = asyncio.create_task(_watch(_ws(b, watch), rewatched))
                    await asyncio.wait_for(_joined(rewatched), 60)
                    for seg, text in enumerate(SENTENCES[2:4], start=2):
                        await _speak(ws, seg, text)
                    await _until_finals(ws, second, 2)
                    await ws.send(json.dumps({"type": "stop"}))
                    async with asyncio.timeout(60):
                        while second[-1].get("type") != "done":
                            second.append(json.loads(await ws.recv()))
                await asyncio.wait_for(again, 60)
                return first, second, watched, rewatched

            first, second, watched, rewatched = asyncio.run(main())
    assert [f["segment"] for f in _finals(watched)] == [0, 1]
    assert watched[-1]["type"] == "ended"
    assert [f["segment"] for f in _finals(rewatched)] == [2, 3]
    assert [f["segment"] for f in _finals(second)] == [2, 3]


def test_a_rival_speaker_on_the_other_replica_leaves_the_winners_viewers_alone(
        redis: RedisServer) -> None:
    """Two speakers race for one room on two replicas while viewers wait on both: one
    wins, the other gets room_taken, and no waiting viewer is sent 'ended' by the loser's
    failed claim: all of them see the winner's finals."""
    room = _room()
    a, b = _replicas(redis)
    with a, b:
        async def speaker(server, frames: list[dict]):  # noqa: ANN001, ANN202
            ws = await websockets.connect(_ws(server, "/v1/live"), max_size=None)
            await ws.send(json.dumps({"type": "start", "target_lang": "de", "room": room,
                                      "drafters": []}))
            frames.append(json.loads(await ws.recv()))
            return ws

        async def main() -> tuple[list[list[dict]], list[dict], list[dict]]:
            watch = f"/v1/live/watch?room={room}&lang=de"
            views: list[list[dict]] = [[] for _ in range(4)]
            tasks = [asyncio.create_task(_watch(_ws(server, watch), frames))
                     for server, frames in zip((a, b, a, b), views, strict=True)]
            await asyncio.wait_for(asyncio.gather(*(_joined(v) for v in views)), 60)
            on_a: list[dict] = []
            on_b: list[dict] = []
            sockets = await asyncio.gather(speaker(a, on_a), speaker(b, on_b))
            winner = 0 if on_a[0]["type"] == "ready" else 1
            loser_frames = (on_a, on_b)[1 - winner]
            ws = sockets[winner]
            spoken: list[dict] = []
            for seg, text in enumerate(SENTENCES[:2]):
                await _speak(ws, seg, text)
            await _until_finals(ws, spoken, 2)
            await ws.send(json.dumps({"type": "stop"}))
            async with asyncio.timeout(60):
                while spoken[-1].get("type") != "done":
                    spoken.append(json.loads(await ws.recv()))
            for s in sockets:
                await s.close()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            return views, loser_frames, spoken

        views, loser, spoken = asyncio.run(main())
    assert loser[0]["type"] == "error" and loser[0]["code"] == "room_taken"
    said = [(f["segment"], f["text"]) for f in _finals(spoken)]
    for frames in views:
        seen = [(f["segment"], f["text"]) for f in _finals(frames[0]["recent"] + frames[1:])]
        assert seen == said and frames[-1]["type"] == "ended"


def _primary_killed(sentinel) -> tuple:  # noqa: ANN001
    """(inject, heal) SIGKILL the primary; heal: Sentinel has promoted its replica."""
    killed = sentinel.primary()

    def inject(_: object) -> None:
        sentinel.servers[killed].kill()

    def heal(_: object) -> None:
        deadline = time.monotonic() + 60
        while sentinel.primary() == killed:
            assert time.monotonic() < deadline, "Sentinel did not promote the replica"
            time.sleep(0.2)

    return inject, heal


@pytest.mark.parametrize("fault", ["primary killed (Sentinel)", "stalled past the lease"])
def test_a_viewer_on_each_replica_and_one_after_the_fault_get_every_final(
        tmp_path: Path, fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real replicas; a speaker on a, a viewer on each replica from the start and one
    on b that joins after the fault. The primary SIGKILLed mid-talk (Sentinel promotes its
    replica, which has none of its own), or Redis standing still for longer than the lease
    while a rival speaker on b asks for the room: every final reaches every viewer once
    and in order, ``ended`` only after the talk's last final, the rival is refused, and the
    room has one owner, the talk's."""
    from app.rooms import redis_client

    monkeypatch.setattr(redis_client, "SOCKET_TIMEOUT_S", 1.0)
    room = _room()
    with contextlib.ExitStack() as stack:
        if fault.startswith("primary"):
            sentinel = stack.enter_context(sentinel_watching_a_pair(tmp_path / "redis"))
            url, (inject, heal) = sentinel.url, _primary_killed(sentinel)
            owner_of = lambda: sentinel.servers[sentinel.primary()].cli(  # noqa: E731
                "GET", f"livetrans:owner:{room}")
        else:
            redis = stack.enter_context(redis_server(tmp_path / "redis", persist=True))
            url = redis.url
            inject, heal = (lambda _: redis.pause()), (lambda _: redis.resume())
            owner_of = lambda: redis.cli("GET", f"livetrans:owner:{room}")  # noqa: E731
        common = {"room_bus": url, "parallel": 2, "room_lease_s": 2.0}
        a = stack.enter_context(LiveServer(replica_id="a", **common))
        b = stack.enter_context(LiveServer(replica_id="b", **common))

        async def main() -> tuple[list[dict], list[list[dict]], dict, str | None]:
            spoken: list[dict] = []
            views: list[list[dict]] = [[], [], []]
            watch = f"/v1/live/watch?room={room}&lang=de"
            async with websockets.connect(_ws(a, "/v1/live"), max_size=None) as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room, "drafters": []}))
                assert json.loads(await ws.recv())["type"] == "ready"
                viewers = [asyncio.create_task(_watch(_ws(a, watch), views[0])),
                           asyncio.create_task(_watch(_ws(b, watch), views[1]))]
                await asyncio.wait_for(asyncio.gather(_joined(views[0]), _joined(views[1])),
                                       60)
                await _speak(ws, 0, SENTENCES[0])
                await _until_finals(ws, spoken, 1)
                await asyncio.to_thread(inject, None)
                rival_said: dict = {}

                async def rival() -> None:
                    async with websockets.connect(_ws(b, "/v1/live"), max_size=None) as r:
                        await r.send(json.dumps({"type": "start", "target_lang": "de",
                                                 "room": room}))
                        rival_said.update(json.loads(await r.recv()))

                rival_task = asyncio.create_task(rival())
                for seg, text in enumerate(SENTENCES[1:3], start=1):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, 3)  # the speaker's own captions go on
                await asyncio.sleep(4.0)  # two leases
                await asyncio.to_thread(heal, None)
                await asyncio.wait_for(rival_task, 60)
                viewers.append(asyncio.create_task(_watch(_ws(b, watch), views[2])))
                await asyncio.wait_for(_joined(views[2]), 60)
                for seg, text in enumerate(SENTENCES[3:], start=3):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, len(SENTENCES))
                owner = await asyncio.to_thread(owner_of)
                await ws.send(json.dumps({"type": "stop"}))
                async with asyncio.timeout(60):
                    while spoken[-1].get("type") != "done":
                        spoken.append(json.loads(await ws.recv()))
            await asyncio.wait_for(asyncio.gather(*viewers), 90)
            return spoken, views, rival_said, owner

        spoken, views, rival_said, owner = asyncio.run(main())
    said = [(f["segment"], f["text"]) for f in _finals(spoken)]
    assert [s for s, _ in said] == list(range(len(SENTENCES)))
    assert rival_said.get("type") == "error"
    assert rival_said.get("code") in ("room_taken", "room_bus_unavailable")
    assert owner is not None and json.loads(owner)["replica"] == "a"
    for frames in views:
        assert frames[0]["type"] == "joined" and frames[-1]["type"] == "ended"
        seen = [(f["segment"], f["text"]) for f in _finals(frames[0]["recent"] + frames[1:])]
        assert seen == said  # every final once, in order, on each replica
        assert [f["type"] for f in frames].count("ended") == 1
