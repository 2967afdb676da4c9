"""``GET /v1/rooms/{room}/transcript`` on the real app (no model: the route needs none), over a
real SQLite file and a real redis-server: who may read which talk, every format, and every
refusal in OpenAI's error shape."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import srt
import webvtt
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api import transcripts as transcripts_api
from app.api.http.auth import Auth
from app.rooms.transcripts import open_transcripts
from app.rooms.transcripts.redis_store import RedisTranscriptStore
from app.rooms.transcripts.store import TalkRecord, TranscriptLine, TranscriptStore
from app.server import create_app
from app.settings import Settings
from tests.redis_server import redis_server

LOOPBACK = "http://127.0.0.1"  # a name the server answers to (--allowed-hosts)
KEY = "operator-key"
ROOM = "keynote-1"
OLD, NEW = "0000000000000aaa", "0000000000000bbb"
T0 = float(int(time.time()) - 86400)  # a day ago: inside the transcripts' retention


def _app(api_keys: list[str] | None = None) -> FastAPI:
    app = create_app(Settings(api_keys=api_keys or []))  # no lifespan: no model loads
    if not any(getattr(r, "path", None) == transcripts_api.PATH for r in app.routes):
        app.include_router(transcripts_api.router)  # until app.server includes it
    return app


def _seed(store: TranscriptStore) -> None:
    """Two talks in ROOM: OLD (de) then NEW (de, ja); another room's talk."""
    async def write() -> None:
        await store.start_talk(TalkRecord(ROOM, OLD, T0 + 1000.0, ("de",)))
        await store.add(ROOM, OLD, "de", TranscriptLine(0, 0.5, 1.5, "old", "alt"))
        await store.start_talk(TalkRecord(ROOM, NEW, T0 + 2000.0, ("de", "ja")))
        for seg, text in enumerate(["Hallo --> Welt", "zwei\n\nZeilen", "drei"]):
            await store.add(ROOM, NEW, "de", TranscriptLine(seg, seg * 2.0, seg * 2.0 + 1,
                                                            f"src {seg}", text))
        await store.add(ROOM, NEW, "ja", TranscriptLine(0, 0.0, 1.0, "src", "こんにちは"))
        await store.start_talk(TalkRecord("other-room", "0000000000000ccc", T0 + 3000.0, ("de",)))

    asyncio.run(write())


@pytest.fixture()
def sqlite_store(tmp_path: Path):
    store = open_transcripts(tmp_path)
    _seed(store)
    yield store
    asyncio.run(store.close())


def _client(store: TranscriptStore | None, api_keys: list[str] | None = None) -> TestClient:
    app = _app(api_keys)
    app.state.livetrans.transcripts = store
    return TestClient(app, base_url=LOOPBACK)


def _get(client: TestClient, room: str = ROOM, headers: dict | None = None, **query: str):
    return client.get(f"/v1/rooms/{room}/transcript", params=query, headers=headers or {})


def _error(response, status: int, code: str, param: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and set(body) == {"message", "type", "param", "code"}
    if param is not None:
        assert body["param"] == param
    return body["message"]


# -- a server without API keys: anyone reads ---------------------------------------------
def test_the_newest_talk_as_webvtt_by_default(sqlite_store) -> None:
    r = _get(_client(sqlite_store), lang="de")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/vtt")
    assert r.headers["content-disposition"] == f'attachment; filename="{ROOM}-de.vtt"'
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["cache-control"] == "no-store"
    assert r.headers["x-livetrans-talk"] == NEW
    cues = webvtt.from_string(r.text, strict=True).captions
    assert [c.text for c in cues] == ["Hallo --&gt; Welt", "zwei Zeilen", "drei"]
    assert [c.start for c in cues] == ["00:00:00.000", "00:00:02.000", "00:00:04.000"]


@pytest.mark.parametrize(("fmt", "media_type"), [
    ("srt", "application/x-subrip; charset=utf-8"), ("txt", "text/plain; charset=utf-8"),
    ("json", "application/json"), ("VTT", "text/vtt; charset=utf-8")])
def test_every_format_with_its_media_type_and_file_name(sqlite_store, fmt: str,
                                                        media_type: str) -> None:
    r = _get(_client(sqlite_store), lang="de", format=fmt)
    assert r.status_code == 200 and r.headers["content-type"] == media_type
    assert r.headers["content-disposition"].endswith(f'-de.{fmt.lower()}"')
    if fmt == "srt":
        assert [s.content for s in srt.parse(r.text)] == ["Hallo --> Welt", "zwei Zeilen",
                                                          "drei"]
    elif fmt == "txt":
        assert r.text == "Hallo --> Welt\nzwei Zeilen\ndrei\n"
    elif fmt == "json":
        data = r.json()
        assert data["talk_id"] == NEW and data["lang"] == "de" and data["room"] == ROOM
        assert [line["text"] for line in data["lines"]] == ["Hallo --> Welt",
                                                            "zwei\n\nZeilen", "drei"]
        assert data["lines"][1] == {"segment": 1, "start": 2.0, "end": 3.0,
                                    "source": "src 1", "text": "zwei\n\nZeilen"}


def test_talk_picks_an_older_talk_and_lang_is_normalised(sqlite_store) -> None:
    r = _get(_client(sqlite_store), lang="DE", format="txt", talk=OLD)
    assert r.status_code == 200 and r.text == "alt\n"
    assert r.headers["x-livetrans-talk"] == OLD


def test_unknown_rooms_talks_and_languages_are_404(sqlite_store) -> None:
    client = _client(sqlite_store)
    assert "no transcript" in _error(_get(client, room="empty-room", lang="de"), 404,
                                     "transcript_not_found", "room")
    _error(_get(client, lang="de", talk="0000000000000fff"), 404, "transcript_not_found", "talk")
    message = _error(_get(client, lang="de", talk="not-a-talk\x00" * 20), 404,
                     "transcript_not_found", "talk")
    assert "\x00" not in message and len(message) < 200
    message = _error(_get(client, lang="fr"), 404, "lang_not_in_talk", "lang")
    assert "de, ja" in message
    _error(_get(client, lang="ja", talk=OLD), 404, "lang_not_in_talk", "lang")


def test_a_talk_without_lines_yet_is_an_empty_file(tmp_path: Path) -> None:
    store = open_transcripts(tmp_path)
    asyncio.run(store.start_talk(TalkRecord(ROOM, NEW, T0 + 1.0, ("de",))))
    r = _get(_client(store), lang="de", format="srt")
    assert r.status_code == 200 and r.text == ""
    asyncio.run(store.close())


# -- a server with API keys: an API key, or the talk's viewer token ------------------------
def test_with_keys_no_token_is_401_whether_or_not_the_room_exists(sqlite_store) -> None:
    client = _client(sqlite_store, [KEY])
    for room in (ROOM, "no-such-room"):
        message = _error(_get(client, room=room, lang="de"), 401, "invalid_token", "token")
        assert "viewer token" in message
    _error(_get(client, lang="de", headers={"Authorization": "Bearer wrong"}), 401,
           "invalid_token")
    # the API-key middleware let it through: the route answered, not the middleware
    assert Auth.from_keys([KEY]).check_http("GET", f"/v1/rooms/{ROOM}/transcript", "").refused \
        is False
    assert Auth.from_keys([KEY]).check_http("GET", f"/v1/rooms/{ROOM}/other", "").refused
    assert Auth.from_keys([KEY]).check_http("GET", "/v1/rooms/a/b/transcript", "").refused


def test_an_api_key_reads_any_talk(sqlite_store) -> None:
    client = _client(sqlite_store, [KEY])
    auth = {"Authorization": f"Bearer {KEY}"}
    r = _get(client, lang="de", format="txt", headers=auth)
    assert r.status_code == 200 and r.headers["x-livetrans-talk"] == NEW
    r = _get(client, lang="de", format="txt", talk=OLD, headers=auth)
    assert r.status_code == 200 and r.text == "alt\n"


def test_a_viewer_token_admits_to_its_own_talk_only(sqlite_store) -> None:
    client = _client(sqlite_store, [KEY])
    rooms = client.app.state.livetrans.rooms  # type: ignore[attr-defined]
    old_token, new_token = rooms.token(ROOM, OLD), rooms.token(ROOM, NEW)
    r = _get(client, lang="de", format="txt", token=old_token)
    assert r.status_code == 200 and r.text == "alt\n"  # its talk, though a newer one exists
    r = _get(client, lang="ja", format="txt", token=new_token)
    assert r.status_code == 200 and r.text == "こんにちは\n"
    _error(_get(client, lang="de", token=old_token, talk=NEW), 401, "invalid_token")
    _error(_get(client, room="other-room", lang="de", token=new_token), 401, "invalid_token")
    _error(_get(client, lang="de", token="0" * 32), 401, "invalid_token")
    _error(_get(client, lang="de", token="é\x00" * 100), 401, "invalid_token")


def test_the_route_asks_the_room_registry_about_tokens(sqlite_store,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    client = _client(sqlite_store, [KEY])
    rooms = client.app.state.livetrans.rooms  # type: ignore[attr-defined]
    asked: list[tuple[str, str | None, str | None]] = []

    def token_ok_for_talk(room: str, talk_id: str | None, token: str | None) -> bool:
        asked.append((room, talk_id, token))
        return talk_id == OLD

    monkeypatch.setattr(rooms, "token_ok_for_talk", token_ok_for_talk)
    r = _get(client, lang="de", format="txt", token="t")
    assert r.status_code == 200 and r.text == "alt\n"
    assert asked == [(ROOM, NEW, "t"), (ROOM, OLD, "t")]  # newest first


# -- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize("room", ["-starts-with-dash", "x" * 65, "bad room", "ä"])
def test_a_bad_room_name_is_400(sqlite_store, room: str) -> None:
    message = _error(_get(_client(sqlite_store), room=room, lang="de"), 400, "invalid_room",
                     "room")
    assert len(message) < 250


def test_bad_parameters_are_400_naming_them(sqlite_store) -> None:
    client = _client(sqlite_store)
    message = _error(_get(client, lang="xx\x1b[31m" + "y" * 500), 400, "unsupported_language",
                     "lang")
    assert "\x1b" not in message and len(message) < 120
    message = _error(_get(client, lang="de", format="pdf"), 400, "invalid_format", "format")
    assert "vtt, srt, txt, json" in message
    _error(_get(client), 400, "missing_required_parameter", "lang")


def test_no_store_yet_is_503() -> None:
    r = _get(_client(None), lang="de")
    _error(r, 503, "transcript_unavailable")
    assert r.headers["retry-after"]


class _FreshRedisStore:
    """The Redis store with a client per call: the test client runs each request on an event
    loop of its own, and a Redis connection belongs to one loop."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def _with(self, call: Callable[[RedisTranscriptStore], Awaitable[Any]]) -> Any:
        client = aioredis.Redis.from_url(self.url, decode_responses=True,
                                         socket_connect_timeout=2, socket_timeout=5)
        try:
            return await call(RedisTranscriptStore(client))
        finally:
            await client.aclose()

    async def start_talk(self, talk: TalkRecord) -> None:
        await self._with(lambda s: s.start_talk(talk))

    async def add(self, room: str, talk_id: str, lang: str, line: TranscriptLine) -> None:
        await self._with(lambda s: s.add(room, talk_id, lang, line))

    async def talks(self, room: str) -> list[TalkRecord]:
        return await self._with(lambda s: s.talks(room))

    async def lines(self, room: str, talk_id: str, lang: str) -> list[TranscriptLine]:
        return await self._with(lambda s: s.lines(room, talk_id, lang))

    async def close(self) -> None:
        pass


def test_on_redis_it_serves_the_transcript_and_a_redis_away_is_503(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as server:
        store = _FreshRedisStore(server.url)
        _seed(store)
        client = _client(store)
        r = _get(client, lang="de", format="txt")
        assert r.status_code == 200 and r.text == "Hallo --> Welt\nzwei Zeilen\ndrei\n"
        server.stop()
        r = _get(client, lang="de", format="txt")
        message = _error(r, 503, "transcript_unavailable")
        assert r.headers["retry-after"] == str(transcripts_api.RETRY_AFTER_S)
        assert "retry" in message


def test_the_caption_screen_and_the_operator_page_offer_the_download() -> None:
    client = TestClient(_app(), base_url=LOOPBACK)
    watch = client.get("/watch").text
    script = client.get("/pages/transcripts.js")
    assert script.status_code == 200 and "/transcript?" in script.text  # one script, both pages
    assert 'id="transcript"' in watch and '<script src="/pages/transcripts.js">' in watch
    assert all(f'data-format="{fmt}"' in watch for fmt in ("vtt", "srt", "txt", "json"))
    live = client.get("/live").text
    assert 'id="transcript-format"' in live and '<script src="/pages/transcripts.js">' in live
    assert "innerHTML" not in watch + live + script.text  # server text is only set as text
