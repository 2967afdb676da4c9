"""Audience links as QR codes: ``GET /v1/rooms/{room}/qr`` and the printable page.

    /v1/rooms/keynote-1/qr?lang=de[&token=VIEWER_TOKEN]

answers an SVG QR code of the caption screen's link for that language of the room
(``/watch?room=keynote-1&lang=de``, plus a viewer token where the server has API keys),
under the server's public URL (``links.py`` beside it). The link itself is in the
``X-Livetrans-Link`` header, so a page can print it under the code, and a room token's
expiry (unix seconds) in ``X-Livetrans-Expires``, so a poster can say until when it works.

A room's code exists before its first talk and, with a room viewer token, stays valid
across its talks, so an organiser prints it ahead:

- without API keys the link carries no token; before a talk any language the server
  serves is answered (no talk's languages are known yet), during a talk only the talk's;
- with keys, ``token=`` a room viewer token (``POST /v1/rooms/{room}/viewer-tokens``;
  ``app.api.viewer_tokens``) answers the link with that token, before or during a talk;
- with keys, the current talk's own token, or an API key (``Authorization: Bearer``, the
  operator) without a token, answers the link with the talk's token (valid for that talk
  only), as before room tokens existed; an API key with a room token embeds that one.

The route is open in the API-key middleware and checks access here. Without access the
answer is 401 whether or not the room has a talk, so a room's existence is not told.

Refusals use the viewer route's codes (``app.live.viewer``): 404 ``invalid_room`` (a
malformed room name), 404 ``unsupported_language``, 404 ``lang_not_in_room`` (a running talk
is not captioned in it), 404 ``lang_not_served`` (before a talk: the server does not serve
it), 400 ``viewer_token_required`` (an API key, no token and no talk: issue a room token),
401 ``invalid_token``, 503 ``room_bus_unavailable`` / ``viewer_tokens_unavailable``.

``GET /live/print?room=keynote-1[&langs=de,ja][&token=...]`` is the printable page of a
room: one large code per language with its link (``app/static/print.html``); the operator
page links to it. ``/pages/qr.js`` is the loader both pages share.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse

from app.api.errors import APIError
from app.api.state import ServerState
from app.api.viewer_routes import (
    RoomAccess,
    check_room_and_lang,
    no_viewer_access,
    room_access,
)
from app.rooms.audience.links import (
    BadBaseURL,
    CurrentTalk,
    current_talk,
    public_base,
    qr_svg,
    viewer_link,
)
from app.rooms.bus import BusUnavailable
from app.rooms.viewer_tokens import looks_like_room_token
from app.translation.prompts import LANGUAGE_NAMES

router = APIRouter()

PATH = "/v1/rooms/{room}/qr"
PRINT_PATH = "/live/print"
SCRIPT_PATH = "/pages/qr.js"
RETRY_AFTER_S = 5
_STATIC = Path(__file__).resolve().parents[2] / "static"  # app/static


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
    token: str | None = Query(None, description="a room viewer token, or the talk's (with "
                              "API keys)"),
) -> Response:
    state: ServerState = request.app.state.livetrans
    lang = check_room_and_lang(room, lang)
    registry = state.rooms
    access = await room_access(request, room, token)
    room_token_given = bool(state.auth.api_keys) and looks_like_room_token(token)
    # no token at all, or a room token that does not admit (expired, revoked, another
    # room's): the operator too, since the link would carry it
    if (not access.any_talk and not token) or (room_token_given
                                                and access.room_token is None):
        raise no_viewer_access("this room's QR code")
    try:
        talk = await current_talk(registry, state.bus, room)
    except BusUnavailable:
        raise APIError(503, "The room bus cannot be reached now; retry shortly.",
                       code="room_bus_unavailable",
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    if not access.any_talk and (talk is None
                                or not registry.token_ok_for_talk(room, talk.talk_id, token)):
        raise no_viewer_access("this room's QR code")
    _check_lang(state, room, lang, talk)
    link_token = _link_token(state, room, talk, access)
    try:
        base = public_base(state.settings.http.public_url, str(request.base_url))
    except BadBaseURL:
        raise APIError(400, "The request's Host is no name a link can carry; set the "
                       "server's --public-url.", code="invalid_host") from None
    link = viewer_link(base, room, lang, link_token)
    name = LANGUAGE_NAMES.get(lang, lang)
    body = qr_svg(link, title=f"Live captions of {room} in {name}")
    headers = {
        "Cache-Control": "no-store",  # may carry a token
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'",  # a drawing, nothing to run
        "X-Livetrans-Link": link,
        "Access-Control-Expose-Headers": "X-Livetrans-Link, X-Livetrans-Talk, "
                                         "X-Livetrans-Expires",
    }
    if talk is not None:
        headers["X-Livetrans-Talk"] = talk.talk_id
    if link_token is not None and link_token == access.room_token:
        headers["X-Livetrans-Expires"] = str(access.expires_at)  # printed under the codes
    return Response(content=body, media_type="image/svg+xml", headers=headers)


def _check_lang(state: ServerState, room: str, lang: str, talk: CurrentTalk | None) -> None:
    """A running talk's languages, else (a code printed ahead) the server's own."""
    if talk is not None:
        if lang not in talk.langs:
            raise APIError(404, f"Room '{room}' is captioned in {', '.join(talk.langs)}; "
                           f"lang '{lang}' is not among them.", param="lang",
                           code="lang_not_in_room")
        return
    served = state.served_langs
    if served is not None and lang not in served:
        raise APIError(404, f"This server serves {', '.join(sorted(served))}; lang '{lang}' "
                       "is not among them.", param="lang", code="lang_not_served")


def _link_token(state: ServerState, room: str, talk: CurrentTalk | None,
                access: RoomAccess) -> str | None:
    """The token the link carries: none without API keys; the room token the request
    showed (valid across talks); else the running talk's own."""
    if not state.rooms.tokens_required:
        return None
    if access.room_token is not None:
        return access.room_token
    if talk is not None:
        return state.rooms.token(room, talk.talk_id)
    raise APIError(400, f"Room '{room}' has no talk now, so no talk token exists: issue a room "
                   f"viewer token (POST /v1/rooms/{room}/viewer-tokens) and pass it as token= "
                   "to get a code that can be printed ahead.", param="token",
                   code="viewer_token_required")


@router.get(PRINT_PATH, include_in_schema=False)
async def print_page() -> FileResponse:
    """A room's printable page of QR codes, one per language (plain HTML + JS; the room,
    languages and token are URL parameters)."""
    return FileResponse(_STATIC / "print.html", media_type="text/html")


@router.get(SCRIPT_PATH, include_in_schema=False)
async def qr_script() -> FileResponse:
    """Fetches a QR code and its link for the operator page and the printable page."""
    return FileResponse(_STATIC / "qr.js", media_type="text/javascript")
