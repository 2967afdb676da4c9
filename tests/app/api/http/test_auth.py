"""Optional API keys: Bearer auth, and sessions scoped to the key that created them."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
import websockets

from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def keyed_server():
    with LiveServer(api_keys=["key-one", "key-two"]) as server:
        yield server


def _client(server, key: str | None) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key or "", max_retries=0)


def test_missing_or_wrong_key_is_401(keyed_server) -> None:
    r = httpx.get(keyed_server.url + "/v1/models")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        _client(keyed_server, "wrong").models.list()
    assert [m.id for m in _client(keyed_server, "key-one").models.list()]
    # health stays open for load balancers
    assert httpx.get(keyed_server.url + "/health").status_code == 200


def test_session_of_another_key_behaves_as_unknown(keyed_server) -> None:
    def update(key: str, text: str) -> dict:
        r = _client(keyed_server, key).chat.completions.create(
            model="default", messages=[{"role": "user", "content": text}],
            extra_body={"target_lang": "de", "session_id": "shared-name"})
        return r.model_extra["livetrans"]

    assert update("key-one", "The meeting starts")["revision"] == 1
    assert update("key-one", "The meeting starts at noon")["revision"] == 2
    other = update("key-two", "The meeting starts at noon")
    assert other["revision"] == 1 and other["draft_tokens"] == 0


def test_websocket_requires_the_key(keyed_server) -> None:
    import asyncio

    url = keyed_server.url.replace("http://", "ws://") + "/v1/live"

    async def main() -> tuple[int | None, str]:
        async with websockets.connect(url) as ws:
            try:
                await ws.recv()
            except websockets.ConnectionClosed:
                pass
            refused = ws.close_code
        async with websockets.connect(
                url, additional_headers={"Authorization": "Bearer key-two"}) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            ready = json.loads(await ws.recv())["type"]
        return refused, ready

    refused, ready = asyncio.run(main())
    assert refused == 1008 and ready == "ready"


# -- app.api.http.auth, without a server ----------------------------------------------------------

def _conn(path: str = "/v1/models", headers: dict[str, str] | None = None,
          query: str = "", kind: str = "http"):
    from starlette.requests import HTTPConnection

    scope = {"type": kind, "path": path, "query_string": query.encode(),
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    if kind == "http":
        scope["method"] = "GET"
    return HTTPConnection(scope)


def test_bearer_key_reads_only_a_bearer_header() -> None:
    from app.api.http.auth import bearer_key

    assert bearer_key("Bearer  k-1 ") == "k-1" and bearer_key("bearer k") == "k"
    assert bearer_key("Basic abc") == "" and bearer_key("") == ""


def test_the_owner_is_a_hash_of_the_key_never_the_key() -> None:
    from app.api.http.auth import owner_of

    owner = owner_of("key-one")
    assert owner == owner_of("key-one") != owner_of("key-two")
    assert len(owner) == 16 and "key-one" not in owner


def test_without_keys_everything_is_open_and_owned_by_nobody() -> None:
    from app.api.http.auth import Access, Auth

    auth = Auth.from_keys([])
    assert auth.check_http("POST", "/v1/chat/completions", "") == Access(False, True, None)
    assert auth.check_http("GET", "/metrics", "anything") == Access(False, True, None)
    assert auth.check_websocket(_conn("/v1/live", kind="websocket")) == (True, None)


def test_with_keys_only_open_paths_and_preflights_need_none() -> None:
    from app.api.http.auth import OPEN_PATHS, Access, Auth, owner_of

    auth = Auth.from_keys(["key-one"])
    assert auth.check_http("GET", "/v1/models", "") == Access(True, False, None)
    assert auth.check_http("GET", "/v1/models", "wrong") == Access(True, False, None)
    assert auth.check_http("GET", "/v1/models", "key-one") == \
        Access(False, True, owner_of("key-one"))
    assert auth.check_http("OPTIONS", "/v1/models", "") == Access(False, False, None)
    for path in OPEN_PATHS:
        assert auth.check_http("GET", path, "") == Access(False, False, None)
    assert auth.check_request(_conn(headers={"Authorization": "Bearer key-one"})).owner == \
        owner_of("key-one")


def test_metrics_take_the_metrics_key_when_one_is_set() -> None:
    from app.api.http.auth import Access, Auth

    shared = Auth.from_keys(["key-one"])  # no metrics key: any API key scrapes
    assert not shared.check_http("GET", "/metrics", "key-one").refused
    assert shared.check_http("GET", "/metrics", "").refused
    own = Auth.from_keys(["key-one"], metrics_key="scrape")
    assert own.check_http("GET", "/metrics", "key-one").refused
    assert own.check_http("GET", "/metrics", "scrape") == Access(False, True, None)
    # a metrics key is no API key (it owns nothing and opens no other route), but it may
    # read /health's details
    assert own.check_http("GET", "/v1/models", "scrape").refused
    assert own.check_http("GET", "/health", "scrape") == Access(False, True, None)
    assert Auth.from_keys([], metrics_key="scrape").check_http("GET", "/v1/models", "") == \
        Access(False, False, None)


def test_a_websocket_shows_its_key_in_the_header_or_the_query() -> None:
    from app.api.http.auth import Auth, owner_of

    auth = Auth.from_keys(["key-one"])
    owner = owner_of("key-one")
    ws = "websocket"
    assert auth.check_websocket(_conn(headers={"Authorization": "Bearer key-one"},
                                      kind=ws)) == (True, owner)
    assert auth.check_websocket(_conn(query="api_key=key-one", kind=ws)) == (True, owner)
    assert auth.check_websocket(_conn(kind=ws)) == (False, None)
    assert auth.check_websocket(_conn(query="api_key=wrong", kind=ws)) == (False, None)
    # the header, when there is one, is the key: a valid query does not rescue a wrong one
    assert auth.check_websocket(_conn(headers={"Authorization": "Bearer wrong"},
                                      query="api_key=key-one", kind=ws)) == (False, None)


def test_the_401_is_openais_authentication_error() -> None:
    from app.api.http.auth import invalid_api_key

    err = invalid_api_key()
    assert (err.status, err.code) == (401, "invalid_api_key")
