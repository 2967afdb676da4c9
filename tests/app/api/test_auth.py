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
