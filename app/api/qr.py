"""Audience links as QR codes: ``GET /v1/rooms/{room}/qr`` and the printable page.

    /v1/rooms/keynote-1/qr?lang=de[&token=VIEWER_TOKEN]

answers an SVG QR code of the caption screen's link for that language of the room's
current talk (``/watch?room=keynote-1&lang=de``, plus the talk's viewer token where the
server has API keys), under the server's public URL (``app.rooms.audience_link``). The
link itself is in the ``X-Livetrans-Link`` header, so a page can print it under the code.

Access is a viewer's, as for ``/v1/live/watch`` and the transcripts: open without API keys;
with keys, an API key (``Authorization: Bearer``, the operator) or the current talk's
viewer token (``token=``; one of an earlier talk gives 401). The route is open in the
API-key middleware and checks that here. Without access the answer is 401 whether or not
the room has a talk, so a room's existence is not told to whoever asks.

Refusals use the viewer route's codes (``app.live.viewer``): 404 ``invalid_room`` for a
malformed room name or a room without a talk now, 404 ``unsupported_language`` for an
unknown language, 404 ``lang_not_in_room`` for a language the talk is not captioned in,
401 ``invalid_token``, 503 ``room_bus_unavailable`` while the room bus cannot be asked.

``GET /live/print?room=keynote-1[&langs=de,ja][&token=...]`` is the printable page of a
room: one large code per language with its link (``app/static/print.html``); the operator
page links to it. ``/pages/qr.js`` is the loader both pages share.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse

from app.api.errors import APIError
from app.api.http.auth import bearer_key
from app.api.state import ServerState
from app.api.viewer_routes import check_room_and_lang, no_viewer_access
from app.rooms.audience_link import BadBaseURL, current_talk, public_base, qr_svg, viewer_link
from app.rooms.bus import BusUnavailable
from app.translation.prompts import LANGUAGE_NAMES

router = APIRouter()

PATH = "/v1/rooms/{room}/qr"
PRINT_PATH = "/live/print"
SCRIPT_PATH = "/pages/qr.js"
RETRY_AFTER_S = 5
_STATIC = Path(__file__).resolve().parents[1] / "static"


@router.get(
    PATH, summary="A QR code of a room's viewer link",
    response_class=Response,
    responses={200: {"description": "the viewer link as an SVG QR code",
                     "content": {"image/svg+xml": {}}}},
)
async def room_qr(
    request: Request,
    room: str,
    lang: str = Query(..., description="the language of the caption screen"),
    token: str | None = Query(None, description="the talk's viewer token (with API keys)"),
) -> Response:
    state: ServerState = request.app.state.livetrans
    lang = check_room_and_lang(room, lang)
    registry = state.rooms
    keys = state.auth.api_keys
    operator = not keys or bearer_key(request.headers.get("authorization", "")) in keys
    if not operator and not token:
        raise no_viewer_access("this room's QR code")
    try:
        talk = await current_talk(registry, state.bus, room)
    except BusUnavailable:
        raise APIError(503, "The room bus cannot be reached now; retry shortly.",
                       code="room_bus_unavailable",
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    if not operator and (talk is None
                         or not registry.token_ok_for_talk(room, talk.talk_id, token)):
        raise no_viewer_access("this room's QR code")
    if talk is None:
        raise APIError(404, f"Room '{room}' has no talk now: a QR code links to a running "
                       "talk (with API keys, its viewer token exists only once it starts).",
                       param="room", code="invalid_room")
    if lang not in talk.langs:
        raise APIError(404, f"Room '{room}' is captioned in {', '.join(talk.langs)}; lang "
                       f"'{lang}' is not among them.", param="lang", code="lang_not_in_room")
    try:
        base = public_base(state.settings.public_url, str(request.base_url))
    except BadBaseURL:
        raise APIError(400, "The request's Host is no name a link can carry; set the "
                       "server's --public-url.", code="invalid_host") from None
    link_token = registry.token(room, talk.talk_id) if registry.tokens_required else None
    link = viewer_link(base, room, lang, link_token)
    name = LANGUAGE_NAMES.get(lang, lang)
    body = qr_svg(link, title=f"Live captions of {room} in {name}")
    return Response(content=body, media_type="image/svg+xml", headers={
        "Cache-Control": "no-store",  # per talk, and may carry its token
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'",  # a drawing, nothing to run
        "X-Livetrans-Link": link,
        "X-Livetrans-Talk": talk.talk_id,
        "Access-Control-Expose-Headers": "X-Livetrans-Link, X-Livetrans-Talk",
    })


@router.get(PRINT_PATH, include_in_schema=False)
async def print_page() -> FileResponse:
    """A room's printable page of QR codes, one per language (plain HTML + JS; the room,
    languages and token are URL parameters)."""
    return FileResponse(_STATIC / "print.html", media_type="text/html")


@router.get(SCRIPT_PATH, include_in_schema=False)
async def qr_script() -> FileResponse:
    """Fetches a QR code and its link for the operator page and the printable page."""
    return FileResponse(_STATIC / "qr.js", media_type="text/javascript")
