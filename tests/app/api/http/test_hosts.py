"""The Host allow-list: a DNS-rebinding page (its own name resolving to 127.0.0.1) cannot
reach a server on loopback, over HTTP or WebSocket."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets

from app.api.http.hosts import default_allowed_hosts, host_matches, host_name, is_loopback


@pytest.mark.parametrize(("header", "name"), [
    ("Example.org:8000", "example.org"), ("[::1]:8000", "::1"), ("::1", "::1"),
    ("localhost", "localhost"), ("", ""), ("127.0.0.1:1", "127.0.0.1"),
])
def test_host_names_lose_port_and_case(header: str, name: str) -> None:
    assert host_name(header) == name


def test_patterns_exact_wildcard_and_any() -> None:
    assert host_matches("captions.example.org", ["captions.example.org"])
    assert host_matches("a.example.org", ["*.example.org"])
    assert not host_matches("example.org.evil", ["*.example.org"])
    assert not host_matches("evilexample.org", ["*.example.org"])
    assert host_matches("anything", ["*"])
    assert not host_matches("evil.example", default_allowed_hosts("127.0.0.1"))
    assert host_matches("localhost", default_allowed_hosts("127.0.0.1"))
    assert default_allowed_hosts("0.0.0.0") == ["*"]
    assert is_loopback("::1") and is_loopback("127.0.0.2") and not is_loopback("0.0.0.0")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example",
                                  "x" * 300, "xn--caf-dma.example"])
def test_a_foreign_host_name_is_refused_on_loopback(live_server, host: str) -> None:
    r = httpx.post(live_server.url + "/v1/chat/completions", headers={"Host": host},
                   json={"model": "default", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_host"

    async def ws() -> int:
        url = live_server.url.replace("http://", "ws://") + "/v1/live"
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url, additional_headers={"Host": host}):
                pass
        return refused.value.response.status_code

    assert asyncio.run(ws()) in (400, 403)  # refused before the handshake completes


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "LOCALHOST:1234", "[::1]:80"])
def test_loopback_names_are_served(live_server, host: str) -> None:
    r = httpx.get(live_server.url + "/v1/models", headers={"Host": host})
    assert r.status_code == 200


def test_allowed_hosts_names_the_public_host() -> None:
    from tests.conftest import LiveServer

    with LiveServer(allowed_hosts=["captions.example.org"]) as server:
        ok = httpx.get(server.url + "/v1/models", headers={"Host": "captions.example.org"})
        other = httpx.get(server.url + "/v1/models", headers={"Host": "localhost"})
    assert ok.status_code == 200 and other.status_code == 400
