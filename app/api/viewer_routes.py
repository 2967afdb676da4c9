"""What the HTTP routes a room's audience reads (HLS renditions, QR codes) share: the 404
that names a bad room or language, and the 401 of a request without viewer access, in the
viewer WebSocket's codes (``invalid_room``, ``unsupported_language``, ``invalid_token``)."""

from __future__ import annotations

from app.api.errors import APIError
from app.live.frames import safe_echo
from app.rooms.registry import ROOM_MAX_CHARS, valid_room
from app.translation.prompts import UnsupportedLanguageError, check_language


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
    return APIError(401, f"Access to {what} needs the talk's viewer token (token=...), given "
                    "to the speaker in 'ready', or an API key (Authorization: Bearer ...); a "
                    "token admits to one talk only.", param="token", code="invalid_token")
