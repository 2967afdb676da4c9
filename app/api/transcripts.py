"""``GET /v1/rooms/{room}/transcript``: a talk's final captions as a file (API.md,
"Transcripts").

    /v1/rooms/keynote-1/transcript?lang=de&format=vtt[&token=VIEWER_TOKEN][&talk=TALK_ID]

Formats: ``vtt`` (default), ``srt``, ``txt``, ``json`` (``app.rooms.transcripts.formats``). The
answer is an attachment named ``<room>-<lang>.<ext>``; a talk still running gives what it
has so far.

Access is a viewer's, as on ``/v1/live/watch``, so the route is open in the API-key
middleware and checks it here:

- a server without API keys: anyone; ``talk=`` picks a talk, default the room's newest;
- with keys, an API key (``Authorization: Bearer``, the operator): the same;
- with keys, a room viewer token (``token=``, issued by the operator: ``app.api.viewer_tokens``):
  any talk of its room, as with an API key;
- with keys, a talk's viewer token (``token=``): it admits to one talk only, so the answer is
  the room's newest talk the token is valid for (``talk=`` may narrow it). A viewer never holds
  an API key, and a token of a room's earlier talk does not open a later one (another
  tenant's talk in a room of the same name).

Refusals are OpenAI-shaped errors. Without access the answer is 401 whether or not the room
has talks, so a room's existence is not told to whoever asks.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from app.api.errors import APIError
from app.api.state import ServerState
from app.api.viewer_routes import room_access
from app.live.frames import safe_echo
from app.rooms.registry import ROOM_MAX_CHARS, valid_room
from app.rooms.transcripts.formats import FORMATS, render
from app.rooms.transcripts.store import TalkRecord, TranscriptStore, TranscriptUnavailable
from app.translation.prompts import UnsupportedLanguageError, check_language

router = APIRouter()

PATH = "/v1/rooms/{room}/transcript"
RETRY_AFTER_S = 5
_TALK_ID = re.compile(r"[0-9a-f]{1,64}")


def _unavailable() -> APIError:
    return APIError(503, "The transcript store cannot be reached now; retry shortly.",
                    code="transcript_unavailable", headers={"Retry-After": str(RETRY_AFTER_S)})


def _no_access() -> APIError:
    return APIError(401, "This transcript needs the talk's viewer token (token=...), given to "
                    "the speaker in 'ready', or an API key (Authorization: Bearer ...); a "
                    "token admits to one talk only.", param="token", code="invalid_token")


def _check_params(room: str, lang: str, fmt: str, talk: str | None) -> tuple[str, str]:
    """The normalised (lang, format), or the 400 that says which parameter is wrong."""
    if not valid_room(room):
        raise APIError(400, f"Invalid room '{safe_echo(room, ROOM_MAX_CHARS)}': 1-"
                       f"{ROOM_MAX_CHARS} characters of A-Z a-z 0-9 . _ -, starting with a "
                       "letter or digit.", param="room", code="invalid_room")
    try:
        lang = check_language(lang[:16], "lang")
    except UnsupportedLanguageError:
        raise APIError(400, f"Unsupported language '{safe_echo(lang, 16)}'.", param="lang",
                       code="unsupported_language") from None
    fmt_key = fmt.strip().lower()
    if fmt_key not in FORMATS:
        raise APIError(400, f"Unknown format '{safe_echo(fmt, 16)}': choose one of "
                       f"{', '.join(FORMATS)}.", param="format", code="invalid_format")
    if talk is not None and not _TALK_ID.fullmatch(talk):
        raise APIError(404, f"Room '{room}' has no talk '{safe_echo(talk, 32)}'.",
                       param="talk", code="transcript_not_found")
    return lang, fmt_key


async def _pick_talk(state: ServerState, store: TranscriptStore, room: str,
                     talk: str | None, token: str | None, operator: bool) -> TalkRecord:
    """The talk to answer with (see the module's docstring), or 401 / 404."""
    if not operator and not token:
        raise _no_access()
    try:
        talks = await store.talks(room)
    except TranscriptUnavailable:
        raise _unavailable() from None
    candidates = [t for t in talks if talk is None or t.talk_id == talk]
    if not operator:
        for record in reversed(candidates):
            if state.rooms.token_ok_for_talk(room, record.talk_id, token):
                return record
        raise _no_access()
    if candidates:
        return candidates[-1]
    if talk is not None:
        raise APIError(404, f"Room '{room}' has no talk '{talk}'.", param="talk",
                       code="transcript_not_found")
    raise APIError(404, f"Room '{room}' has no transcript.", param="room",
                   code="transcript_not_found")


@router.get(
    PATH, summary="Download a talk's transcript",
    response_class=Response,
    responses={200: {"description": "the transcript as a file",
                     "content": {media: {} for media, _ in FORMATS.values()}}},
)
async def transcript(
    request: Request,
    room: str,
    lang: str = Query(..., description="the language of the captions"),
    fmt: str = Query("vtt", alias="format", description="vtt, srt, txt or json"),
    token: str | None = Query(None, description="the talk's viewer token (with API keys)"),
    talk: str | None = Query(None, description="a talk id (default: the newest talk)"),
) -> Response:
    state: ServerState = request.app.state.livetrans
    talk = talk or None  # an empty ``talk=`` is no choice: the newest talk
    lang, fmt = _check_params(room, lang, fmt, talk)
    store: TranscriptStore | None = getattr(state, "transcripts", None)
    if store is None:  # not opened yet (start-up) or already closed
        raise _unavailable()
    # an API key (the operator), a server without keys, or a room viewer token: any talk
    access = await room_access(request, room, token)
    record = await _pick_talk(state, store, room, talk, token, access.any_talk)
    if lang not in record.langs:
        langs = ", ".join(record.langs) or "no language"
        raise APIError(404, f"Talk {record.talk_id} of room '{room}' was captioned in {langs}; "
                       f"not in '{lang}'.", param="lang", code="lang_not_in_talk")
    try:
        lines = await store.lines(room, record.talk_id, lang)
    except TranscriptUnavailable:
        raise _unavailable() from None
    # a long talk is tens of thousands of cues: rendered off the event loop
    body, media_type = await run_in_threadpool(render, record, lang, lines, fmt)
    if not media_type.startswith("text/") and media_type != "application/json":
        media_type += "; charset=utf-8"  # Starlette names the charset of text/* only
    ext = FORMATS[fmt][1]
    return Response(content=body, media_type=media_type, headers={
        "Content-Disposition": f'attachment; filename="{room}-{lang}.{ext}"',
        "Cache-Control": "no-store",  # grows while the talk runs; may need a token
        "X-Content-Type-Options": "nosniff",  # a caption's markup is never run as a page
        "X-Livetrans-Talk": record.talk_id,
    })
