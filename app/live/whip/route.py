"""``POST /v1/rooms/{room}/whip``: WHIP ingest (RFC 9725), so OBS and browsers publish
their sound straight into a room (API.md, "Where events happen").

    POST /v1/rooms/keynote-1/whip?target_langs=de,ja[&source_lang=en]
    Content-Type: application/sdp          (the offer; Bearer auth as for /v1)
    -> 201 Created, the SDP answer, Location: /v1/rooms/keynote-1/whip/<id>
    DELETE <Location>                       -> 200: the talk ends as 'stop' ends it
                                               (only with the key that published it)

The session is ``session.py`` beside it (``app.live.whip.session``); this route checks
the request, composes the speaker's ``start`` from the query (as data: JSON, validated by
the live connection like any speaker's) and turns a refusal into an OpenAI-shaped HTTP
error.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response

from app.api.errors import APIError
from app.api.http.auth import bearer_key
from app.api.state import ServerState
from app.live.connection import serve
from app.live.messages import MAX_TARGET_LANGS
from app.live.peer import IceOptions, OfferError, check_offer
from app.live.whip.session import PCM_RATE, SessionRefused
from app.rooms.registry import valid_room

router = APIRouter()

RETRY_AFTER_S = 5
# refusals of the live connection as HTTP statuses (anything else is the caller's: 400)
STATUS_OF = {"room_taken": 409, "too_many_connections": 429, "busy": 503,
             "server_busy": 503, "not_ready": 503, "speech_unavailable": 503,
             "room_bus_unavailable": 503, "closed": 503, "no_udp_port": 503}


def _whip_available() -> bool:
    try:
        import aiortc  # noqa: F401
    except ImportError:
        return False
    return True


def _owner(request: Request, state: ServerState) -> str | None:
    """The owner of the request's API key (None when the server has no keys): a session
    is its publisher's, so another tenant's key cannot end it."""
    key = bearer_key(request.headers.get("authorization", ""))
    return state.auth.owner(key) if state.auth.api_keys else None


@router.post("/v1/rooms/{room}/whip", status_code=201)
async def publish(room: str, request: Request) -> Response:
    state: ServerState = request.app.state.livetrans
    if not valid_room(room):
        raise APIError(400, "room: 1-64 characters of A-Z a-z 0-9 . _ -, starting with a "
                       "letter or digit", param="room", code="invalid_room")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/sdp":
        raise APIError(415, "a WHIP offer is sent with Content-Type: application/sdp",
                       code="unsupported_media_type")
    langs = [t.strip() for t in request.query_params.get("target_langs", "").split(",")
             if t.strip()]
    if not langs:
        raise APIError(400, "target_langs: give the languages to caption, e.g. "
                       "?target_langs=de,ja", param="target_langs", code="invalid_request")
    if len(langs) > MAX_TARGET_LANGS:
        raise APIError(400, f"target_langs: at most {MAX_TARGET_LANGS} languages",
                       param="target_langs", code="invalid_request")
    if not _whip_available():
        raise APIError(503, "this server cannot take WHIP: pip install 'livetrans[speech]'",
                       code="whip_unavailable")
    try:
        sdp = check_offer(await request.body())
    except OfferError as exc:
        raise APIError(400, exc.message, param="sdp", code=exc.code) from None
    start = {"type": "start", "input": "audio", "sample_rate": PCM_RATE, "room": room,
             "target_langs": langs,
             "source_lang": request.query_params.get("source_lang", "en")}
    owner = _owner(request, state)
    services = state.live_services()
    try:
        session, answer = await state.whip.open(
            room, sdp, start, lambda socket: serve(socket, services, owner),
            IceOptions.from_settings(state.settings), owner)
    except OfferError as exc:
        raise APIError(400, exc.message, param="sdp", code=exc.code) from None
    except SessionRefused as exc:
        refusal = exc.refusal
        status = STATUS_OF.get(refusal.code, 400)
        headers = {"Retry-After": str(RETRY_AFTER_S)} if status in (429, 503) else None
        raise APIError(status, refusal.message, param=refusal.param, code=refusal.code,
                       headers=headers) from None
    location = f"/v1/rooms/{quote(room)}/whip/{session.id}"
    return Response(answer, status_code=201, media_type="application/sdp",
                    headers={"Location": location})


@router.delete("/v1/rooms/{room}/whip/{resource}")
async def unpublish(room: str, resource: str, request: Request) -> Response:
    state: ServerState = request.app.state.livetrans
    session = state.whip.get(room, resource, _owner(request, state))
    if session is None:
        raise APIError(404, "no WHIP session at this address (it ended, or never began)",
                       code="whip_session_not_found")
    await state.whip.close(session)
    return Response(status_code=200)
