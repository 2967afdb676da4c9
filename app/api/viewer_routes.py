"""What the HTTP routes a room's audience reads (HLS renditions, QR codes, transcripts)
share: the 404 that names a bad room or language, the 401 of a request without viewer
access, in the viewer WebSocket's codes (``invalid_room``, ``unsupported_language``,
``invalid_token``), and who may read every talk of a room (``room_access``)."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from app.api.errors import APIError
from app.api.http.auth import bearer_key
from app.live.frames import safe_echo
from app.rooms.registry import ROOM_MAX_CHARS, valid_room
from app.rooms.viewer_tokens import ViewerTokensUnavailable, looks_like_room_token
from app.translation.prompts import UnsupportedLanguageError, check_language

RETRY_AFTER_S = 5


def check_room_and_lang(room: str, lang: str) -> str:
    """The normalised language, or the 404 that says which name is wrong."""
    if not valid_room(room):
        raise APIError(404, f"Invalid room '{safe_echo(room, ROOM_MAX_CHARS)}': 1-"
                       f"{ROOM_MAX_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a "
                       "letter or digit.", param="room", code="invalid_room")
    try:
        return check_language(lang[:16], "lang")
    except UnsupportedLanguageError:
        raise APIError(404, f"Unsupported language '{safe_echo(lang, 16)}'.", param="lang",
                       code="unsupported_language") from None


def no_viewer_access(what: str) -> APIError:
    """The 401 of a request for ``what`` ("this room's subtitles") without access."""
    return APIError(401, f"Access to {what} needs a viewer token (token=...): the talk's, "
                    "given to the speaker in 'ready' (it admits to that talk only), or a room "
                    "viewer token the operator issued (unexpired, not revoked); or an API key "
                    "(Authorization: Bearer ...).", param="token", code="invalid_token")


def viewer_tokens_unavailable() -> APIError:
    """The 503 of a room viewer token that cannot be checked now (its store is away)."""
    return APIError(503, "The viewer token store cannot be reached now; retry shortly.",
                    code="viewer_tokens_unavailable",
                    headers={"Retry-After": str(RETRY_AFTER_S)})


@dataclass(frozen=True)
class RoomAccess:
    """Who asks for a room's audience route: ``operator`` (an API key, or a server without
    keys) and ``room_token`` (the request's room viewer token when it admits to the room
    now, else None). Either one may read every talk of the room; otherwise only a talk's
    own token opens that talk."""

    operator: bool
    room_token: str | None = None
    expires_at: int | None = None  # the room token's expiry (unix seconds)

    @property
    def any_talk(self) -> bool:
        return self.operator or self.room_token is not None


async def room_access(request: Request, room: str, token: str | None) -> RoomAccess:
    """The request's access to ``room`` (a valid room name). A room viewer token is
    checked against the token store (503 ``viewer_tokens_unavailable`` when it cannot be
    asked); anything else passes through for the route's talk-token check."""
    state = request.app.state.livetrans
    keys = state.auth.api_keys
    operator = not keys or bearer_key(request.headers.get("authorization", "")) in keys
    if not keys or not looks_like_room_token(token):
        return RoomAccess(operator)
    tokens = getattr(state, "viewer_tokens", None)
    if tokens is None:  # not opened yet (start-up) or already closed
        raise viewer_tokens_unavailable()
    try:
        signed = await tokens.check(room, token)
    except ViewerTokensUnavailable:
        raise viewer_tokens_unavailable() from None
    if signed is None:
        return RoomAccess(operator)
    return RoomAccess(operator, token, signed.expires_at)
