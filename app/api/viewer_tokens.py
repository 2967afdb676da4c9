"""Room viewer tokens, issued by the operator so the audience's links and QR codes can be
printed ahead of an event (API.md, "Captions out"; ``app.rooms.viewer_tokens``).

    POST   /v1/rooms/{room}/viewer-tokens        {"expires_in": 604800, "langs": ["de"]}
    GET    /v1/rooms/{room}/viewer-tokens
    DELETE /v1/rooms/{room}/viewer-tokens/{id}

An API key is needed (the middleware asks for it: these paths are not open). ``POST``
answers 201 with the token (shown this once), its ``id``, ``created_at`` and
``expires_at``, the printable page's ``print_url`` and, for each of ``langs``, the viewer
link (``links``). A token admits to every talk of the room (the viewer socket, the
transcripts, HLS, the QR code) until it expires or is revoked. ``GET`` lists the room's
live tokens (never the tokens themselves); ``DELETE`` revokes one at once, on every replica
of a Redis room bus (viewers it admitted are ended within ``app.live.viewer``'s
``ROOM_TOKEN_RECHECK_S``).

Refusals are OpenAI-shaped: 400 ``invalid_room``, ``invalid_expires_in``,
``unsupported_language``, ``invalid_request`` (a body that is no JSON object, an unknown
field), ``viewer_tokens_not_needed`` (a server without API keys: its links need no token);
404 ``viewer_token_not_found``; 409 ``too_many_viewer_tokens``; 503
``viewer_tokens_unavailable`` (retry). Tokens and room names never reach a log line.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from app.api.errors import APIError
from app.api.state import ServerState
from app.api.viewer_routes import viewer_tokens_unavailable
from app.live.frames import safe_echo
from app.rooms.audience.links import BadBaseURL, public_base, viewer_link
from app.rooms.registry import ROOM_MAX_CHARS, valid_room
from app.rooms.viewer_tokens import (
    DEFAULT_EXPIRES_IN_S,
    MAX_EXPIRES_IN_S,
    MAX_TOKENS_PER_ROOM,
    MIN_EXPIRES_IN_S,
    RoomTokenRecord,
    RoomViewerTokens,
    ViewerTokensUnavailable,
    valid_token_id,
)
from app.translation.prompts import UnsupportedLanguageError, check_language

router = APIRouter()

PATH = "/v1/rooms/{room}/viewer-tokens"
ITEM_PATH = "/v1/rooms/{room}/viewer-tokens/{token_id}"
PRINT_PATH = "/live/print"
MAX_LANGS = 10
_FIELDS = {"expires_in", "langs"}


def _check_room(room: str) -> None:
    if not valid_room(room):
        raise APIError(400, f"Invalid room '{safe_echo(room, ROOM_MAX_CHARS)}': 1-"
                       f"{ROOM_MAX_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a "
                       "letter or digit.", param="room", code="invalid_room")


def _tokens(request: Request) -> RoomViewerTokens:
    """The server's room tokens (400 without API keys: no viewer needs one)."""
    state: ServerState = request.app.state.livetrans
    if not state.auth.api_keys:
        raise APIError(400, "This server has no API keys: its viewer links and QR codes "
                       "need no token (GET /v1/rooms/{room}/qr works before any talk).",
                       code="viewer_tokens_not_needed")
    tokens = state.viewer_tokens
    if tokens is None:  # not opened yet (start-up) or already closed
        raise viewer_tokens_unavailable()
    return tokens


def _bad_body(message: str, param: str | None = None,
              code: str = "invalid_request") -> APIError:
    return APIError(400, message, param=param, code=code)


def _expires_in(value: Any) -> int:
    """Whole seconds from ``MIN_EXPIRES_IN_S`` to ``MAX_EXPIRES_IN_S``."""
    ok = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if not ok or not MIN_EXPIRES_IN_S <= value <= MAX_EXPIRES_IN_S:
        raise _bad_body(f"expires_in must be whole seconds from {MIN_EXPIRES_IN_S} to "
                        f"{MAX_EXPIRES_IN_S} ({MAX_EXPIRES_IN_S // 86400} days).",
                        param="expires_in", code="invalid_expires_in")
    return int(value)


def _langs(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_LANGS:
        raise _bad_body(f"langs must be a list of at most {MAX_LANGS} language codes.",
                        param="langs")
    langs: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _bad_body("langs must be a list of language codes.", param=f"langs[{i}]")
        try:
            lang = check_language(item[:16], f"langs[{i}]")
        except UnsupportedLanguageError:
            raise APIError(400, f"Unsupported language '{safe_echo(item, 16)}'.",
                           param=f"langs[{i}]", code="unsupported_language") from None
        if lang not in langs:
            langs.append(lang)
    return langs


async def _body(request: Request) -> tuple[int, list[str]]:
    """(expires_in, langs) of the request's optional JSON body."""
    raw = await request.body()
    if not raw.strip():
        return DEFAULT_EXPIRES_IN_S, []
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise _bad_body("The body must be a JSON object such as {\"expires_in\": 604800}.") \
            from None
    if not isinstance(body, dict):
        raise _bad_body("The body must be a JSON object such as {\"expires_in\": 604800}.")
    for name in body:
        if name not in _FIELDS:
            raise _bad_body(f"Unknown field '{safe_echo(str(name), 32)}': use expires_in and "
                            "langs.", param=safe_echo(str(name), 32),
                            code="unsupported_parameter")
    expires_in = _expires_in(body.get("expires_in", DEFAULT_EXPIRES_IN_S))
    return expires_in, _langs(body.get("langs", []))


def _record(record: RoomTokenRecord) -> dict[str, Any]:
    return {"object": "room.viewer_token", "id": record.token_id, "room": record.room,
            "created_at": record.created_at, "expires_at": record.expires_at}


def _base(request: Request) -> str:
    state: ServerState = request.app.state.livetrans
    try:
        return public_base(state.settings.http.public_url, str(request.base_url))
    except BadBaseURL:
        raise APIError(400, "The request's Host is no name a link can carry; set the "
                       "server's --public-url.", code="invalid_host") from None


_BODY_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "expires_in": {"type": "integer", "minimum": MIN_EXPIRES_IN_S,
                       "maximum": MAX_EXPIRES_IN_S, "default": DEFAULT_EXPIRES_IN_S,
                       "description": "seconds the token is valid"},
        "langs": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_LANGS,
                  "description": "languages to answer viewer links for"},
    },
}


@router.post(PATH, summary="Issue a room viewer token (printable audience links)",
             status_code=201, openapi_extra={"requestBody": {
                 "required": False,
                 "content": {"application/json": {"schema": _BODY_SCHEMA}}}})
async def issue_token(request: Request, room: str) -> JSONResponse:
    _check_room(room)
    tokens = _tokens(request)
    expires_in, langs = await _body(request)
    base = _base(request)
    try:
        issued = await tokens.issue(room, expires_in)
    except ViewerTokensUnavailable:
        raise viewer_tokens_unavailable() from None
    if issued is None:
        raise APIError(409, f"Room '{room}' has {MAX_TOKENS_PER_ROOM} live viewer tokens, "
                       "its bound: revoke one (DELETE /v1/rooms/{room}/viewer-tokens/{id}) "
                       "or let one expire.", param="room", code="too_many_viewer_tokens")
    token = issued.token
    body = {**_record(issued.record), "token": token,
            "print_url": f"{base}{PRINT_PATH}?{urlencode({'room': room, 'token': token})}",
            "links": {lang: viewer_link(base, room, lang, token) for lang in langs}}
    return JSONResponse(body, status_code=201, headers={"Cache-Control": "no-store"})


@router.get(PATH, summary="List a room's live viewer tokens")
async def list_tokens(request: Request, room: str) -> JSONResponse:
    _check_room(room)
    tokens = _tokens(request)
    try:
        records = await tokens.issued(room)
    except ViewerTokensUnavailable:
        raise viewer_tokens_unavailable() from None
    return JSONResponse({"object": "list", "data": [_record(r) for r in records]},
                        headers={"Cache-Control": "no-store"})


@router.delete(ITEM_PATH, summary="Revoke a room viewer token")
async def revoke_token(request: Request, room: str, token_id: str) -> Response:
    _check_room(room)
    tokens = _tokens(request)
    found = False
    if valid_token_id(token_id):
        try:
            found = await tokens.revoke(room, token_id)
        except ViewerTokensUnavailable:
            raise viewer_tokens_unavailable() from None
    if not found:
        raise APIError(404, f"Room '{room}' has no live viewer token "
                       f"'{safe_echo(token_id, 32)}'.", param="token_id",
                       code="viewer_token_not_found")
    return JSONResponse({"object": "room.viewer_token.deleted", "id": token_id,
                         "deleted": True})
