"""One access line per WebSocket connection: route template, how it ended, request id."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import websockets

from app.api.http.ws_access_log import WebSocketEnd


def _end(*messages: tuple[str, dict]) -> str:
    end = WebSocketEnd()
    for direction, message in messages:
        (end.sent if direction == "sent" else end.received)(message)
    return end.describe()


def test_the_end_of_a_connection_is_named_from_its_messages() -> None:
    accept = ("sent", {"type": "websocket.accept"})
    assert _end(accept, ("sent", {"type": "websocket.close", "code": 1008})) == "closed 1008"
    assert _end(accept, ("received", {"type": "websocket.disconnect", "code": 1001})) == \
        "client closed 1001"
    assert _end(("sent", {"type": "websocket.close"})).startswith("403")
    assert _end(("sent", {"type": "websocket.http.response.start", "status": 429})) == "429"
    # the first close counts: the server's close, then the client's echo of it
    assert _end(accept, ("sent", {"type": "websocket.close", "code": 1000}),
                ("received", {"type": "websocket.disconnect", "code": 1000})) == "closed 1000"


def test_a_live_connection_is_logged_once_by_its_route_never_its_query(live_server,
                                                                        caplog) -> None:
    async def main() -> None:
        url = live_server.url.replace("http", "ws") + "/v1/live?secret_room=x%0AFAKE"
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "start", "target_lang": "de"}))
            assert json.loads(await ws.recv())["type"] == "ready"
            await ws.send(json.dumps({"type": "stop"}))
            assert json.loads(await ws.recv())["type"] == "done"

    with caplog.at_level(logging.INFO, logger="livetrans.server"):
        asyncio.run(main())
        time.sleep(0.2)
    lines = [r.getMessage() for r in caplog.records if " WS " in r.getMessage()]
    assert len(lines) == 1, lines
    assert " WS /v1/live -> closed 1000 (" in lines[0] and lines[0].startswith("request_id=")
    assert "FAKE" not in lines[0] and "secret_room" not in lines[0]
