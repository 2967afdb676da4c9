"""Rooms across two real replicas (two servers with the real model) on Debian's
redis-server: a speaker on one, viewers on both, every final once and in order on each;
one speaker per room across replicas; a viewer token for one talk only; the transcript
from either replica, also after both restart; Redis lost mid-talk loses no final."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest
import websockets

from tests.conftest import LiveServer
from tests.redis_server import RedisServer, redis_server

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


def test_redis_lost_mid_talk_the_speaker_goes_on_and_no_final_is_lost(
        redis: RedisServer) -> None:
    room = _room()
    a, b = _replicas(redis)
    with a, b:
        async def main() -> tuple[list[dict], list[dict], dict]:
            spoken: list[dict] = []
            on_b: list[dict] = []
            async with websockets.connect(_ws(a, "/v1/live"), max_size=None) as ws:
                await ws.send(json.dumps({"type": "start", "target_lang": "de",
                                          "room": room, "drafters": []}))
                json.loads(await ws.recv())
                viewer_b = asyncio.create_task(
                    _watch(_ws(b, f"/v1/live/watch?room={room}&lang=de"), on_b))
                await asyncio.wait_for(_joined(on_b), 60)
                await _speak(ws, 0, SENTENCES[0])
                await _until_finals(ws, spoken, 1)
                redis.stop()  # mid-talk
                for seg, text in enumerate(SENTENCES[1:3], start=1):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, 3)  # the speaker's own captions go on
                redis.start()
                for seg, text in enumerate(SENTENCES[3:], start=3):
                    await _speak(ws, seg, text)
                await _until_finals(ws, spoken, len(SENTENCES))
                await ws.send(json.dumps({"type": "stop"}))
                async with asyncio.timeout(60):
                    while spoken[-1].get("type") != "done":
                        spoken.append(json.loads(await ws.recv()))
            await asyncio.wait_for(viewer_b, 60)
            async with asyncio.timeout(60):  # the buffered finals reach the transcript
                while True:
                    r = httpx.get(f"{b.url}/v1/rooms/{room}/transcript",
                                  params={"lang": "de", "format": "json"}, timeout=30)
                    if r.status_code == 200 and len(r.json()["lines"]) == len(SENTENCES):
                        return spoken, on_b, r.json()
                    await asyncio.sleep(0.2)

        spoken, on_b, transcript = asyncio.run(main())
    said = [(f["segment"], f["text"]) for f in _finals(spoken)]
    assert [s for s, _ in said] == list(range(len(SENTENCES)))
    assert [(x["segment"], x["text"]) for x in transcript["lines"]] == said
    seen = [f["segment"] for f in _finals(on_b)]
    assert seen == sorted(set(seen))  # what b's viewer saw came once, in order
    assert 0 in seen and on_b[-1]["type"] == "ended"
