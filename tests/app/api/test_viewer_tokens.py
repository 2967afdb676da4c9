"""Room viewer tokens on the real app (no model: the routes need none), over a real SQLite
file and, across replicas, a real redis-server: the operator issues, lists and revokes
them; a token admits to every talk of its room (the QR code before the first talk, the
viewer socket, transcripts, HLS) until it expires or is revoked, and on every replica of a
Redis room bus; every refusal is OpenAI-shaped (a clear 4xx, never a 500)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from app import server as server_module
from app.live import viewer as viewer_module
from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts.store import TalkRecord, TranscriptLine
from app.rooms.viewer_tokens import RoomViewerTokens, open_viewer_tokens
from app.server import create_app
from app.settings import Settings
from tests.redis_server import redis_server

LOOPBACK = "http://127.0.0.1"
WS = "ws://127.0.0.1"
KEY = "operator-key"
ROOM = "keynote-1"
OPERATOR = {"Authorization": f"Bearer {KEY}"}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def client(tmp_path: Path, clock: Clock):
    """A keyed server whose room tokens live in a SQLite file, as without a room bus."""
    app = create_app(Settings(api_keys=[KEY]))  # no lifespan: no model loads
    state = app.state.livetrans
    store = open_viewer_tokens(tmp_path / "data")
    state.viewer_tokens = RoomViewerTokens([KEY], store, clock=clock)
    yield TestClient(app, base_url=LOOPBACK)
    asyncio.run(store.close())


def _issue(client: TestClient, room: str = ROOM, **body) -> dict:
    r = client.post(f"/v1/rooms/{room}/viewer-tokens", json=body or None, headers=OPERATOR)
    assert r.status_code == 201, r.text
    assert r.headers["cache-control"] == "no-store"
    return r.json()


def _error(response, status: int, code: str, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and set(body) == {"message", "type", "param", "code"}
    if param is not None:
        assert body["param"] == param
    return body["message"]


def _talk(client: TestClient, room: str = ROOM, langs: tuple[str, ...] = ("de", "ja")):
    speaker = object()
    return speaker, client.app.state.livetrans.rooms.claim(room, speaker, list(langs))


def _qr(client: TestClient, room: str = ROOM, headers: dict | None = None, **query: str):
    return client.get(f"/v1/rooms/{room}/qr", params=query, headers=headers or {})


def _link_token(response) -> str | None:
    assert response.status_code == 200, response.text
    return parse_qs(urlsplit(response.headers["x-livetrans-link"]).query).get(
        "token", [None])[0]


# -- issuing, listing, revoking --------------------------------------------------------------
def test_the_operator_issues_lists_and_revokes_room_tokens(client: TestClient,
                                                          clock: Clock) -> None:
    issued = _issue(client, expires_in=3600, langs=["de", "JA", "de"])
    assert issued["object"] == "room.viewer_token" and issued["room"] == ROOM
    assert issued["expires_at"] == issued["created_at"] + 3600 == int(clock.now) + 3600
    token, token_id = issued["token"], issued["id"]
    assert token.startswith("rv1.") and token_id in token
    assert issued["links"] == {
        lang: f"{LOOPBACK}/watch?room={ROOM}&lang={lang}&token={token}" for lang in ("de", "ja")}
    assert issued["print_url"] == f"{LOOPBACK}/live/print?room={ROOM}&token={token}"
    default = _issue(client)  # no body: a week
    assert default["expires_at"] - default["created_at"] == 7 * 86400 and default["links"] == {}

    listed = client.get(f"/v1/rooms/{ROOM}/viewer-tokens", headers=OPERATOR).json()
    assert listed["object"] == "list"
    assert [t["id"] for t in listed["data"]] == [token_id, default["id"]]  # soonest first
    assert all("token" not in t for t in listed["data"])  # shown once, at issue
    assert client.get("/v1/rooms/other-room/viewer-tokens", headers=OPERATOR).json()["data"] \
        == []

    r = client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{token_id}", headers=OPERATOR)
    assert r.status_code == 200 and r.json() == {"object": "room.viewer_token.deleted",
                                                 "id": token_id, "deleted": True}
    _error(client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{token_id}", headers=OPERATOR),
           404, "viewer_token_not_found", "token_id")
    _error(client.delete(f"/v1/rooms/other-room/viewer-tokens/{default['id']}",
                         headers=OPERATOR), 404, "viewer_token_not_found")
    assert [t["id"] for t in client.get(f"/v1/rooms/{ROOM}/viewer-tokens",
                                        headers=OPERATOR).json()["data"]] == [default["id"]]


def test_token_routes_need_an_api_key_and_a_viewer_token_is_none(client: TestClient) -> None:
    token = _issue(client)["token"]
    for method in ("post", "get"):
        for headers in ({}, {"Authorization": f"Bearer {token}"}):
            r = getattr(client, method)(f"/v1/rooms/{ROOM}/viewer-tokens", headers=headers)
            _error(r, 401, "invalid_api_key")
    _error(client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{'0' * 16}"), 401, "invalid_api_key")


@pytest.mark.parametrize(("body", "code", "param"), [
    (b'{"expires_in": 0}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": 59}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": 31708801}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": "3600"}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": true}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": 3600.5}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": NaN}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": 1e999}', "invalid_expires_in", "expires_in"),
    (b'{"expires_in": null}', "invalid_expires_in", "expires_in"),
    (b'{"ttl": 3600}', "unsupported_parameter", "ttl"),
    (b'{"langs": "de"}', "invalid_request", "langs"),
    (b'{"langs": [1]}', "invalid_request", "langs[0]"),
    (b'{"langs": ["xx\\u0000"]}', "unsupported_language", "langs[0]"),
    (b'[3600]', "invalid_request", None),
    (b'{"expires_in": ', "invalid_request", None),
    (b'\xff\xfe', "invalid_request", None),
    (b"[" * 100_000, "invalid_request", None),
])
def test_a_bad_body_is_a_400_naming_the_field(client: TestClient, body: bytes, code: str,
                                              param: str | None) -> None:
    r = client.post(f"/v1/rooms/{ROOM}/viewer-tokens", content=body,
                    headers={**OPERATOR, "Content-Type": "application/json"})
    message = _error(r, 400, code, param)
    assert "\x00" not in message and len(message) < 300
    assert client.get(f"/v1/rooms/{ROOM}/viewer-tokens", headers=OPERATOR).json()["data"] == []


def test_bad_rooms_unknown_ids_and_the_per_room_bound(client: TestClient) -> None:
    for room in ("-bad", "x" * 65, "a%20b"):
        _error(client.post(f"/v1/rooms/{room}/viewer-tokens", headers=OPERATOR), 400,
               "invalid_room", "room")
        _error(client.get(f"/v1/rooms/{room}/viewer-tokens", headers=OPERATOR), 400,
               "invalid_room", "room")
    for token_id in ("0" * 16, "nothex", "0123456789ABCDEF", "0" * 200):
        _error(client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{token_id}", headers=OPERATOR),
               404, "viewer_token_not_found")
    client.app.state.livetrans.viewer_tokens.max_per_room = 2
    _issue(client)
    _issue(client)
    _error(client.post(f"/v1/rooms/{ROOM}/viewer-tokens", headers=OPERATOR), 409,
           "too_many_viewer_tokens", "room")
    _issue(client, room="other-room")


def test_without_api_keys_no_token_is_needed_and_none_is_issued(tmp_path: Path) -> None:
    client = TestClient(create_app(Settings()), base_url=LOOPBACK)
    _error(client.post(f"/v1/rooms/{ROOM}/viewer-tokens"), 400, "viewer_tokens_not_needed")
    # the QR code exists before any talk, and its link carries no token
    assert _link_token(_qr(client, lang="de")) is None
    r = _qr(client, lang="ja")
    assert r.headers["x-livetrans-link"] == f"{LOOPBACK}/watch?room={ROOM}&lang=ja"
    assert "x-livetrans-talk" not in r.headers
    _talk(client)  # a talk running: its languages only, as before
    _error(_qr(client, lang="fr"), 404, "lang_not_in_room", "lang")


def test_a_store_not_open_is_503_never_a_500() -> None:
    client = TestClient(create_app(Settings(api_keys=[KEY])), base_url=LOOPBACK)
    r = client.post(f"/v1/rooms/{ROOM}/viewer-tokens", headers=OPERATOR)
    _error(r, 503, "viewer_tokens_unavailable")
    assert r.headers["retry-after"] == "5"
    token = "rv1." + "0" * 16 + ".9999999999." + "0" * 32
    _error(_qr(client, lang="de", token=token), 503, "viewer_tokens_unavailable")


# -- the QR code: printed ahead, valid across talks ----------------------------------------
def test_a_room_token_gets_the_code_before_the_first_talk_and_across_talks(
        client: TestClient) -> None:
    issued = _issue(client)
    token = issued["token"]
    before = _qr(client, lang="ja", token=token)
    assert _link_token(before) == token and "x-livetrans-talk" not in before.headers
    assert before.headers["x-livetrans-expires"] == str(issued["expires_at"])
    assert before.headers["x-livetrans-link"] == \
        f"{LOOPBACK}/watch?room={ROOM}&lang=ja&token={token}"
    assert before.content.startswith(b"<svg ")
    # the operator embeds the room token the same way
    assert _link_token(_qr(client, lang="ja", token=token, headers=OPERATOR)) == token
    rooms = client.app.state.livetrans.rooms
    for _ in range(2):  # two talks in a row: the same link each time
        speaker, room = _talk(client)
        during = _qr(client, lang="ja", token=token)
        assert during.headers["x-livetrans-link"] == before.headers["x-livetrans-link"]
        assert during.headers["x-livetrans-talk"] == room.talk_id
        _error(_qr(client, lang="fr", token=token), 404, "lang_not_in_room", "lang")
        # a talk's own token still gets a code of that talk's token
        talk_token = rooms.token(ROOM, room.talk_id)
        by_talk_token = _qr(client, lang="de", token=talk_token)
        assert _link_token(by_talk_token) == talk_token
        assert "x-livetrans-expires" not in by_talk_token.headers
        rooms.release(room, speaker)


def test_a_room_token_refused_is_401_even_for_the_operator(client: TestClient,
                                                          clock: Clock) -> None:
    issued = _issue(client, expires_in=600)
    token = issued["token"]
    # another room's token, a forged one, a made-up one
    _error(_qr(client, room="other-room", lang="de", token=token), 401, "invalid_token")
    forged = token[:-4] + ("0000" if not token.endswith("0000") else "1111")
    for bad in (forged, "rv1.junk", "rv1." + "é" * 60):
        _error(_qr(client, lang="de", token=bad), 401, "invalid_token", "token")
        _error(_qr(client, lang="de", token=bad, headers=OPERATOR), 401, "invalid_token")
    clock.now += 600  # expired
    _error(_qr(client, lang="de", token=token), 401, "invalid_token")
    clock.now -= 600
    assert _link_token(_qr(client, lang="de", token=token)) == token
    client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{issued['id']}", headers=OPERATOR)
    _error(_qr(client, lang="de", token=token), 401, "invalid_token")
    _error(_qr(client, lang="de", token=token, headers=OPERATOR), 401, "invalid_token")


def test_the_operator_without_a_room_token_and_no_talk_is_told_to_issue_one(
        client: TestClient) -> None:
    message = _error(_qr(client, lang="de", headers=OPERATOR), 400, "viewer_token_required",
                     "token")
    assert "viewer-tokens" in message
    _error(_qr(client, lang="de"), 401, "invalid_token")  # and nobody else learns anything


def test_before_a_talk_the_code_is_of_a_language_the_server_serves(
        client: TestClient) -> None:
    token = _issue(client)["token"]
    client.app.state.livetrans.served_langs = frozenset({"de", "ja"})
    assert _link_token(_qr(client, lang="ja", token=token)) == token
    _error(_qr(client, lang="fr", token=token), 404, "lang_not_served", "lang")


# -- the token admits to the room's talks: viewer socket, transcripts, HLS -------------------
def _joined(client: TestClient, token: str, lang: str = "de") -> dict:
    with client.websocket_connect(f"{WS}/v1/live/watch?room={ROOM}&lang={lang}&token={token}") \
            as ws:
        return ws.receive_json()


def test_a_viewer_with_a_room_token_may_wait_for_the_talk_and_join_any(
        client: TestClient) -> None:
    issued = _issue(client)
    token = issued["token"]
    frame = _joined(client, token)  # before any talk: it waits (a talk token cannot)
    assert frame["type"] == "joined" and frame["langs"] == []
    speaker, room = _talk(client)
    frame = _joined(client, token, "ja")
    assert frame["type"] == "joined" and frame["langs"] == ["de", "ja"]
    client.app.state.livetrans.rooms.release(room, speaker)
    _talk(client)  # the room's next talk: the same token
    assert _joined(client, token)["type"] == "joined"
    with client.websocket_connect(f"{WS}/v1/live/watch?room=other-room&lang=de&token={token}") \
            as ws:
        assert ws.receive_json()["code"] == "invalid_token"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
        assert closed.value.code == 1008
    client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{issued['id']}", headers=OPERATOR)
    assert _joined(client, token)["code"] == "invalid_token"


def test_a_revocation_ends_the_viewers_the_token_admitted(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewer_module, "ROOM_TOKEN_RECHECK_S", 0.05)
    issued = _issue(client)
    _talk(client)
    talk_token = client.app.state.livetrans.rooms.token(ROOM, client.app.state.livetrans
                                                        .rooms.rooms[ROOM].talk_id)
    with client.websocket_connect(f"{WS}/v1/live/watch?room={ROOM}&lang=de&token="
                                  f"{issued['token']}") as revoked, \
            client.websocket_connect(f"{WS}/v1/live/watch?room={ROOM}&lang=de&token="
                                     f"{talk_token}") as other:
        assert revoked.receive_json()["type"] == "joined"
        assert other.receive_json()["type"] == "joined"
        time.sleep(0.3)  # rechecked a few times: still valid, still watching
        r = client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{issued['id']}", headers=OPERATOR)
        assert r.status_code == 200
        frame = revoked.receive_json()
        assert frame["type"] == "error" and frame["code"] == "invalid_token"
        assert revoked.receive_json() == {"type": "ended"}
        # the talk goes on for a viewer with the talk's own token
        client.app.state.livetrans.rooms.rooms[ROOM].publish(
            "de", {"type": "caption", "final": True}, '{"type": "caption"}', True)
        assert other.receive_json() == {"type": "caption"}


def _seed_transcripts(tmp_path: Path):
    store = open_transcripts(tmp_path / "transcripts")
    t0 = float(int(time.time()) - 3600)

    async def write() -> None:
        await store.start_talk(TalkRecord(ROOM, "0000000000000aaa", t0, ("de",)))
        await store.add(ROOM, "0000000000000aaa", "de", TranscriptLine(0, 0.5, 1.5, "a", "alt"))
        await store.start_talk(TalkRecord(ROOM, "0000000000000bbb", t0 + 60, ("de",)))
        await store.add(ROOM, "0000000000000bbb", "de", TranscriptLine(0, 0.5, 1.5, "n", "neu"))

    asyncio.run(write())
    return store


def test_a_room_token_reads_every_talks_transcript_and_hls(client: TestClient,
                                                           tmp_path: Path) -> None:
    store = _seed_transcripts(tmp_path)
    client.app.state.livetrans.transcripts = store
    try:
        issued = _issue(client)
        token = issued["token"]
        url = f"/v1/rooms/{ROOM}/transcript"
        r = client.get(url, params={"lang": "de", "format": "txt", "token": token})
        assert r.status_code == 200 and "neu" in r.text
        r = client.get(url, params={"lang": "de", "format": "txt", "token": token,
                                    "talk": "0000000000000aaa"})
        assert r.status_code == 200 and "alt" in r.text
        r = client.get(f"/v1/rooms/{ROOM}/hls/de.m3u8", params={"token": token})
        assert r.status_code == 200, r.text
        segment = next(line for line in r.text.splitlines() if line.endswith(
            f"token={token}") and not line.startswith("#"))  # segments carry the token
        r = client.get(f"/v1/rooms/{ROOM}/hls/{segment}")
        assert r.status_code == 200, r.text
        client.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{issued['id']}", headers=OPERATOR)
        _error(client.get(url, params={"lang": "de", "token": token}), 401, "invalid_token")
        _error(client.get(f"/v1/rooms/{ROOM}/hls/de.m3u8", params={"token": token}), 401,
               "invalid_token")
        _error(client.get(f"/v1/rooms/{ROOM}/hls/{segment}"), 401, "invalid_token")
    finally:
        asyncio.run(store.close())


# -- two replicas on one Redis room bus -------------------------------------------------------
def test_a_token_issued_on_one_replica_admits_on_another_until_revoked_on_either(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "_load_engine", lambda state: None)  # no model
    monkeypatch.setattr(viewer_module, "ROOM_TOKEN_RECHECK_S", 0.05)
    with redis_server(tmp_path / "redis", persist=True) as redis:
        def replica(name: str) -> TestClient:
            return TestClient(create_app(Settings(api_keys=[KEY], room_bus=redis.url,
                                                  replica_id=name)), base_url=LOOPBACK)

        with replica("a") as a, replica("b") as b:
            issued = _issue(a, langs=["de"])
            token = issued["token"]
            assert _link_token(_qr(b, lang="de", token=token)) == token
            with a.websocket_connect(f"{WS}/v1/live/watch?room={ROOM}&lang=de&token={token}") \
                    as watching:  # waits for the talk on a
                assert watching.receive_json()["type"] == "joined"
                r = b.delete(f"/v1/rooms/{ROOM}/viewer-tokens/{issued['id']}",
                             headers=OPERATOR)
                assert r.status_code == 200
                assert watching.receive_json()["code"] == "invalid_token"  # revoked on b
            _error(_qr(a, lang="de", token=token), 401, "invalid_token")
            assert _joined(a, token)["code"] == "invalid_token"
            kept = _issue(b)["token"]
        # both replicas restarted, Redis kept: the kept token still admits, the revoked not
        with replica("a") as a:
            assert _link_token(_qr(a, lang="de", token=kept)) == kept
            _error(_qr(a, lang="de", token=token), 401, "invalid_token")
            redis.stop()
            r = _qr(a, lang="de", token=kept)
            assert r.status_code == 503 and r.json()["error"]["code"] in (
                "viewer_tokens_unavailable", "room_bus_unavailable")
            redis.start()
