"""``GET /v1/rooms/{room}/hls/{lang}.m3u8`` and its segments on the real app (no model: the
routes need none), over a real SQLite file and a real redis-server: a running and an ended
talk, who may read which talk, the offset, two replicas on one Redis bus, and every refusal
in OpenAI's error shape (one clear 4xx naming the field, never a 500)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import m3u8
import pytest
import webvtt
from fastapi.testclient import TestClient

from app.rooms.bus import TalkInfo
from app.rooms.bus.redis_bus import RedisBus
from app.rooms.hls.timeline import HlsTiming
from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts.store import TalkRecord, TranscriptLine, TranscriptStore
from app.server import create_app
from app.settings import Settings
from tests.redis_server import redis_server

LOOPBACK = "http://127.0.0.1"
KEY = "operator-key"
ROOM = "keynote-1"
OLD, NEW, LIVE = "0000000000000aaa", "0000000000000bbb", "0000000000000ccc"
T0 = float(int(time.time()) - 86400)  # a day ago: inside the transcripts' retention
SEGMENT_S, WINDOW_S = 2, 6
NEW_LINES = [TranscriptLine(0, 0.5, 1.5, "s0", "Hallo <Welt>"),
             TranscriptLine(1, 1.8, 4.6, "s1", "zwei\n\nZeilen"),
             TranscriptLine(2, 7.0, 7.0, "s2", "drei"),
             TranscriptLine(3, 9.25, 10.5, "s3", "  ")]  # no text left: no cue


def _seed(store: TranscriptStore) -> None:
    """OLD (de), then NEW (de, ja), both ended; another room's talk."""
    async def write() -> None:
        await store.start_talk(TalkRecord(ROOM, OLD, T0 + 1000.0, ("de",)))
        await store.add(ROOM, OLD, "de", TranscriptLine(0, 0.5, 1.5, "old", "alt"))
        await store.start_talk(TalkRecord(ROOM, NEW, T0 + 2000.0, ("de", "ja")))
        for line in NEW_LINES:
            await store.add(ROOM, NEW, "de", line)
        await store.add(ROOM, NEW, "ja", TranscriptLine(0, 0.0, 1.0, "s", "こんにちは"))
        await store.start_talk(TalkRecord("other-room", "0000000000000ddd", T0, ("de",)))

    asyncio.run(write())


@pytest.fixture()
def store(tmp_path: Path):
    store = open_transcripts(tmp_path)
    _seed(store)
    yield store
    asyncio.run(store.close())


def _client(store: TranscriptStore | None, api_keys: list[str] | None = None,
            **settings) -> TestClient:
    app = create_app(Settings(api_keys=api_keys or [], hls_segment_s=SEGMENT_S,
                              hls_window_s=WINDOW_S, **settings))  # no lifespan, no model
    app.state.livetrans.transcripts = store
    return TestClient(app, base_url=LOOPBACK)


def _playlist(client: TestClient, room: str = ROOM, lang: str = "de", headers=None,
              **query: str):
    return client.get(f"/v1/rooms/{room}/hls/{lang}.m3u8", params=query,
                      headers=headers or {})


def _error(response, status: int, code: str, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and set(body) == {"message", "type", "param", "code"}
    if param is not None:
        assert body["param"] == param
    return body["message"]


def _segments(client: TestClient, playlist_url: str, text: str, headers=None) -> list[str]:
    """Each segment of the playlist, fetched by its URI resolved as a player does."""
    bodies = []
    for seg in m3u8.loads(text).segments:
        url = urljoin(playlist_url, seg.uri)
        r = client.get(url, headers=headers or {})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "text/vtt; charset=utf-8"
        bodies.append(r.text)
    return bodies


def _cues(bodies: list[str]) -> list[tuple[str, str, str, str]]:
    """The distinct cues of the segments (a cue spanning windows is in each), in order."""
    seen: dict[tuple[str, str, str, str], None] = {}
    for body in bodies:
        vtt = webvtt.from_string(body, strict=True)
        assert vtt.metadata and vtt.metadata[0].startswith("X-TIMESTAMP-MAP=")
        for c in vtt.captions:
            seen.setdefault((c.identifier, c.start, c.end, c.text), None)
    return list(seen)


# -- an ended talk -------------------------------------------------------------------------
def test_an_ended_talk_lists_every_segment_with_every_final_at_the_transcripts_times(
        store) -> None:
    client = _client(store)
    r = _playlist(client)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/vnd.apple.mpegurl"
    assert r.headers["x-livetrans-talk"] == NEW
    playlist = m3u8.loads(r.text)
    assert playlist.is_endlist and playlist.media_sequence == 0
    assert playlist.target_duration == SEGMENT_S
    # the last cue ends at 8 s (a cue lasts 1 s at least): windows 0..3
    assert [s.uri for s in playlist.segments] == [f"de/{NEW}/{i}.vtt" for i in range(4)]
    url = f"{LOOPBACK}/v1/rooms/{ROOM}/hls/de.m3u8"
    cues = _cues(_segments(client, url, r.text))
    # the transcript download's WebVTT: the same cues, the same times, the same text
    download = client.get(f"/v1/rooms/{ROOM}/transcript", params={"lang": "de"})
    expected = [(c.identifier, c.start, c.end, c.text)
                for c in webvtt.from_string(download.text).captions]
    assert cues == expected
    assert [c[3] for c in cues] == ["Hallo &lt;Welt&gt;", "zwei Zeilen", "drei"]
    r = client.get(f"/v1/rooms/{ROOM}/hls/de/{NEW}/4.vtt")  # past the end
    _error(r, 404, "segment_not_found", "index")


def test_the_offset_maps_the_talks_start_onto_the_videos_clock(store) -> None:
    client = _client(store)
    url = f"{LOOPBACK}/v1/rooms/{ROOM}/hls/de.m3u8"
    r = _playlist(client, offset="1.5")
    assert all(s.uri.endswith("?offset=1.5") for s in m3u8.loads(r.text).segments)
    for body in _segments(client, url, r.text):
        assert body.splitlines()[1] == "X-TIMESTAMP-MAP=MPEGTS:135000,LOCAL:00:00:00.000"
    r = _playlist(client, offset="12345.678")  # travels to the millisecond
    assert all(s.uri.endswith("?offset=12345.678") for s in m3u8.loads(r.text).segments)
    [first, *_] = _segments(client, url, r.text)
    assert first.splitlines()[1] == "X-TIMESTAMP-MAP=MPEGTS:1111111020,LOCAL:00:00:00.000"
    r = _playlist(client, offset="-2")
    [first, *_] = _segments(client, url, r.text)
    assert first.splitlines()[1] == "X-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:02.000"
    # the server's default (serve --hls-offset-s)
    client = _client(store, hls_offset_s=10.0)
    r = _playlist(client)
    [first, *_] = _segments(client, url, r.text)
    assert first.splitlines()[1] == "X-TIMESTAMP-MAP=MPEGTS:900000,LOCAL:00:00:00.000"


# -- a running talk ------------------------------------------------------------------------
def _running(client: TestClient, store: TranscriptStore, seconds: float) -> object:
    """A talk LIVE in ROOM on this replica, started ``seconds`` ago, one cue a second."""
    state = client.app.state.livetrans
    started = time.time() - seconds
    speaker = object()
    state.rooms.claim(ROOM, speaker, ["de"], talk_id=LIVE, started_at=started)

    async def write() -> None:
        await store.start_talk(TalkRecord(ROOM, LIVE, started, ("de",)))
        for seg in range(int(seconds) - 1):
            await store.add(ROOM, LIVE, "de", TranscriptLine(seg, seg + 0.2, seg + 0.8,
                                                             "s", f"live {seg}"))

    asyncio.run(write())
    return speaker


def test_a_running_talk_lists_its_last_published_segments(store) -> None:
    client = _client(store)
    speaker = _running(client, store, 40.0)
    r = _playlist(client)
    assert r.status_code == 200 and r.headers["x-livetrans-talk"] == LIVE
    assert r.headers["cache-control"] == "no-cache"
    playlist = m3u8.loads(r.text)
    assert not playlist.is_endlist
    published = HlsTiming(SEGMENT_S, WINDOW_S).published(40.0)
    # a bound: the window's three segments, the newest published ones (the clock moved a
    # little since: one more may be out)
    assert len(playlist.segments) == 3
    assert playlist.media_sequence in (published - 3, published - 2)
    newest = playlist.media_sequence + 2
    url = f"{LOOPBACK}/v1/rooms/{ROOM}/hls/de.m3u8"
    cues = _cues(_segments(client, url, r.text))
    window_ms = (playlist.media_sequence * SEGMENT_S * 1000, (newest + 1) * SEGMENT_S * 1000)
    assert cues and all(c[3].startswith("live ") for c in cues)
    # each cue is shown from s + 0.2 for the 1 s floor (its final came at s + 0.8)
    assert {int(c[0]) for c in cues} == {s for s in range(39)
                                         if window_ms[0] < s * 1000 + 1200
                                         and s * 1000 + 200 < window_ms[1]}
    r = client.get(f"/v1/rooms/{ROOM}/hls/de/{LIVE}/{newest + 1000}.vtt")  # not yet out
    _error(r, 404, "segment_not_found", "index")
    # the talk ends: every segment from 0, as far as the live playlist reached at least
    state = client.app.state.livetrans
    state.rooms.release(state.rooms.rooms[ROOM], speaker)
    assert not m3u8.loads(_playlist(client).text).is_endlist  # just ended: a grace
    _later(client.app, 60.0)  # a minute on: over
    ended = m3u8.loads(_playlist(client).text)
    assert ended.is_endlist and ended.media_sequence == 0
    assert len(ended.segments) >= newest + 1
    assert {int(c[0]) for c in _cues(_segments(client, url, _playlist(client).text))} == \
        set(range(39))


def _later(app, seconds: float) -> None:
    """The HLS routes' clock, ``seconds`` ahead (a talk's end is over its grace then)."""
    app.state.hls_source.clock = lambda: time.time() + seconds


# -- access --------------------------------------------------------------------------------
def test_with_api_keys_a_viewer_token_admits_to_its_talk_only(store) -> None:
    client = _client(store, api_keys=[KEY])
    rooms = client.app.state.livetrans.rooms
    _error(_playlist(client), 401, "invalid_token", "token")  # no token
    _error(_playlist(client, room="no-such-room"), 401, "invalid_token")  # nothing told
    _error(_playlist(client, token="0" * 32), 401, "invalid_token")
    _error(_playlist(client, token=rooms.token("other-room", "0000000000000ddd")), 401,
           "invalid_token")  # another room's talk
    # the old talk's token: the old talk (the newest the token admits to), not the new one
    old = rooms.token(ROOM, OLD)
    r = _playlist(client, token=old)
    assert r.status_code == 200 and r.headers["x-livetrans-talk"] == OLD
    uris = [s.uri for s in m3u8.loads(r.text).segments]
    assert uris and all(u.startswith(f"de/{OLD}/") and u.endswith(f"?token={old}")
                        for u in uris)
    _error(client.get(f"/v1/rooms/{ROOM}/hls/de/{NEW}/0.vtt", params={"token": old}), 401,
           "invalid_token", "token")  # a segment of another talk
    assert client.get(f"/v1/rooms/{ROOM}/hls/de/{OLD}/0.vtt",
                      params={"token": old}).status_code == 200
    new = rooms.token(ROOM, NEW)
    url = f"{LOOPBACK}/v1/rooms/{ROOM}/hls/de.m3u8?token={new}"
    r = client.get(url)
    assert r.headers["x-livetrans-talk"] == NEW
    assert len(_cues(_segments(client, url, r.text))) == 3
    # an API key (the operator): the newest talk; segment URIs carry no key
    bearer = {"Authorization": f"Bearer {KEY}"}
    r = _playlist(client, headers=bearer)
    assert r.status_code == 200 and r.headers["x-livetrans-talk"] == NEW
    assert "token" not in r.text and KEY not in r.text
    assert client.get(f"/v1/rooms/{ROOM}/hls/de/{NEW}/0.vtt", headers=bearer).status_code \
        == 200


# -- bad input -----------------------------------------------------------------------------
def test_unknown_rooms_and_languages_are_404_with_the_viewer_routes_codes(store) -> None:
    client = _client(store)
    _error(_playlist(client, room="-bad"), 404, "invalid_room", "room")
    _error(_playlist(client, room="x" * 65), 404, "invalid_room", "room")
    _error(_playlist(client, room="empty-room"), 404, "invalid_room", "room")
    _error(_playlist(client, lang="xx"), 404, "unsupported_language", "lang")
    _error(_playlist(client, lang="fr"), 404, "lang_not_in_room", "lang")
    _error(client.get(f"/v1/rooms/{ROOM}/hls/fr/{NEW}/0.vtt"), 404, "lang_not_in_room",
           "lang")
    _error(client.get(f"/v1/rooms/{ROOM}/hls/de/ffff/0.vtt"), 404, "segment_not_found")
    _error(client.get(f"/v1/rooms/{ROOM}/hls/de/NOT-HEX/0.vtt"), 404, "segment_not_found")
    for index in ("-1", "x", "1" * 40, "1e3"):
        _error(client.get(f"/v1/rooms/{ROOM}/hls/de/{NEW}/{index}.vtt"), 404,
               "segment_not_found", "index")


@pytest.mark.parametrize("offset", ["nan", "inf", "-inf", "abc", "1e9", "86400.5", "0x10",
                                    "1" * 500, "1_0", " 5", "\u0661", "1e1", "--1", "1."])
def test_a_bad_offset_is_400_naming_it(store, offset: str) -> None:
    client = _client(store)
    message = _error(_playlist(client, offset=offset), 400, "invalid_offset", "offset")
    assert len(message) < 300
    _error(client.get(f"/v1/rooms/{ROOM}/hls/de/{NEW}/0.vtt", params={"offset": offset}),
           400, "invalid_offset", "offset")


@pytest.mark.parametrize("path", [
    "/v1/rooms/%ED%A0%80/hls/de.m3u8", "/v1/rooms/r/hls/%00.m3u8",
    "/v1/rooms/r/hls/de%0A.m3u8", "/v1/rooms/" + "a" * 5000 + "/hls/de.m3u8",
    "/v1/rooms/r/hls/de/%ED%A0%80/0.vtt", "/v1/rooms/r/hls/de/aa/99999999999999999999.vtt",
    "/v1/rooms/r/hls/" + "d" * 5000 + ".m3u8",
])
def test_hostile_paths_are_a_4xx_never_a_500(store, path: str) -> None:
    r = _client(store).get(path)
    assert 400 <= r.status_code < 500, r.text
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_without_the_store_it_is_503_to_retry(store) -> None:
    r = _playlist(_client(None))
    _error(r, 503, "transcript_unavailable")
    assert r.headers["retry-after"]


# -- two replicas on one Redis bus ---------------------------------------------------------
def test_the_replica_without_the_speaker_serves_the_playlist(tmp_path: Path) -> None:
    """Replica a runs the talk (its bus owns the room, its store has the lines); replica b,
    with no viewer of the room, serves the live playlist, then the ended one, from Redis."""
    with redis_server(tmp_path / "redis") as redis:
        async def main() -> None:
            bus_a, bus_b = RedisBus(redis.url, "a"), RedisBus(redis.url, "b")
            app = create_app(Settings(room_bus=redis.url, hls_segment_s=SEGMENT_S,
                                      hls_window_s=WINDOW_S))
            state = app.state.livetrans
            await bus_a.start(type(state.rooms)())
            await bus_b.start(state.rooms)
            store_a = open_transcripts(tmp_path, bus_a.redis)
            state.bus, state.transcripts = bus_b, open_transcripts(tmp_path, bus_b.redis)
            started = time.time() - 20.0
            talk = TalkInfo(ROOM, LIVE, "a", ("de",), started)
            await bus_a.claim(talk)
            await store_a.start_talk(TalkRecord(ROOM, LIVE, started, ("de",)))
            for seg in range(19):
                await store_a.add(ROOM, LIVE, "de", TranscriptLine(seg, seg + 0.1, seg + 0.9,
                                                                   "s", f"b {seg}"))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url=LOOPBACK) as b:
                url = f"{LOOPBACK}/v1/rooms/{ROOM}/hls/de.m3u8"
                live = await b.get(url)
                assert live.status_code == 200, live.text
                playlist = m3u8.loads(live.text)
                assert not playlist.is_endlist and playlist.segments
                reached = (playlist.media_sequence + len(playlist.segments)) * SEGMENT_S
                edge = await bus_a.redis.get(f"livetrans:hls-edge:{ROOM}:{LIVE}")
                assert float(edge) == reached  # raised before b answered
                seg = await b.get(urljoin(url, playlist.segments[0].uri))
                assert seg.status_code == 200 and "b " in seg.text
                await asyncio.wait_for(bus_a.release(talk), 30)  # the talk ends on a
                _later(app, 60.0)  # past the grace for its last finals
                ended = m3u8.loads((await b.get(url)).text)
                assert ended.is_endlist and ended.media_sequence == 0
                assert len(ended.segments) * SEGMENT_S >= reached
                texts = set()
                for s in ended.segments:
                    r = await b.get(urljoin(url, s.uri))
                    assert r.status_code == 200, r.text
                    texts |= {c.text for c in webvtt.from_string(r.text).captions}
                assert texts == {f"b {i}" for i in range(19)}
                assert urlsplit(urljoin(url, ended.segments[0].uri)).path == \
                    f"/v1/rooms/{ROOM}/hls/de/{LIVE}/0.vtt"
            for bus in (bus_a, bus_b):
                await bus.close(1.0)

        asyncio.run(main())
