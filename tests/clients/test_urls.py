from clients.urls import live_url


def test_http_and_ws_addresses_give_the_live_websocket_url() -> None:
    assert live_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/v1/live"
    assert live_url("https://captions.example/") == "wss://captions.example/v1/live"
    assert live_url("ws://h:1") == "ws://h:1/v1/live"
    assert live_url("wss://h") == "wss://h/v1/live"
    assert live_url("localhost:8000") == "ws://localhost:8000/v1/live"
