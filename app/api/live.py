"""``WebSocket /v1/live``: the speakers' route (API.md, "Live captions").

The route checks the origin and the API key, then hands the socket to the live subsystem
(``app.live.connection.serve``) with what it may use of the server (``LiveServices``);
admission, the reader, the fan-out and the publisher are the subsystem's.
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from app.api.http.origins import origin_allowed
from app.api.state import ServerState
from app.live.connection import refuse, serve
from app.live.limits import CLOSE_POLICY

router = APIRouter()


@router.websocket("/v1/live")
async def live(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    if not origin_allowed(ws, state.settings):
        await refuse(ws, CLOSE_POLICY, "origin not allowed")
        return
    accepted, owner = state.auth.check_websocket(ws)
    if not accepted:
        await refuse(ws, CLOSE_POLICY, "invalid API key")
        return
    await serve(ws, state.live_services(), owner)
