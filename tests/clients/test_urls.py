from clients.urls import live_url


def test_http_and_ws_addresses_give_the_live_websocket_url() -> None:
    assert live_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/v1/live"
    assert live_url("https://captions.example/") == "wss://captions.example/v1/live"
    assert live_url("ws://h:1") == "ws://h:1/v1/live"
    assert live_url("wss://h") == "wss://h/v1/live"
    assert live_url("localhost:8000") == "ws://localhost:8000/v1/live"


def test_client_commands_take_the_server_from_livetrans_server(monkeypatch) -> None:
    from clients.urls import LOCAL_SERVER, default_server

    monkeypatch.delenv("LIVETRANS_SERVER", raising=False)
    assert default_server() == LOCAL_SERVER
    monkeypatch.setenv("LIVETRANS_SERVER", "https://captions.example:8443")
    assert default_server() == "https://captions.example:8443"


def test_an_address_that_is_none_is_one_usage_error() -> None:
    import pytest

    from app.usage import UsageError
    from clients.urls import http_url, watch_url

    assert http_url("ws://h:1/") == "http://h:1"
    assert http_url("wss://h/base/") == "https://h/base"
    assert watch_url("wss://h", "r-1", "de", "t") == "https://h/watch?room=r-1&lang=de&token=t"
    for bad, says in (("ftp://h", "unsupported scheme"), ("http://", "not an address"),
                      ("not a url", "not an address"), ("http://h:port", "port"),
                      ("http://h:70000", "port")):
        with pytest.raises(UsageError, match=says):
            http_url(bad)
