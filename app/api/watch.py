"""``WebSocket /v1/live/watch``: read-only viewers of a room (API.md, "Events").

    /v1/live/watch?room=keynote-1&lang=de[&token=VIEWER_TOKEN]

The route checks the origin; joining, the frames a viewer is sent and the other refusals
are the live subsystem's (``app.live.viewer``).
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from app.api.http.origins import origin_allowed
from app.api.state import ServerState
from app.live.limits import CLOSE_POLICY
from app.live.viewer import refuse_viewer, watch

router = APIRouter()


@router.websocket("/v1/live/watch")
async def watch_room(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    if not origin_allowed(ws, state.settings):
        await refuse_viewer(ws, CLOSE_POLICY, "origin_not_allowed", "origin not allowed")
        return
    await watch(ws, state.live_services())
