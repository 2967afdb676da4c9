"""HLS subtitle renditions of a room's talk (docs/captions-out-hls.md): a live WebVTT media
playlist per language, for a player beside the organiser's own video stream.

    GET /v1/rooms/{room}/hls/{lang}.m3u8[?token=VIEWER_TOKEN][&offset=SECONDS]
    GET /v1/rooms/{room}/hls/{lang}/{talk}/{index}.vtt[?token=...][&offset=...]

The playlist is the room's newest talk (with a viewer token: the newest talk the token
admits to); its segment URIs are relative and name the talk, so a player keeps the talk it
started with, and they carry the playlist's ``token`` and ``offset`` (a player cannot add
them). What a playlist and a segment hold, and when, is ``timeline`` (its text
``playlist``); where it comes from, on any replica of the room bus, ``source``.

The room voice's audio renditions (``app.rooms.voice.route``) and its WebRTC listeners
(``app.live.listen.route``) find the talk, check access and read the offset with the helpers
here (``playlist_talk``, ``segment_access``, ``rendition_offset``, ``segment_query``), so a
player gets the same talk, the same refusals and the same clock from every rendition. This
module sits in the API layer (the server state, the OpenAI shape of errors), so nothing in
the package imports it: the server mounts it (tests/test_import_layers.py).

Access is a viewer's, as on ``/v1/live/watch`` and the transcript download, so the routes
are open in the API-key middleware and check it here: anyone without API keys; with keys,
an API key (``Authorization: Bearer``), a room viewer token (``token=``; any talk of its
room) or the talk's viewer token (``token=``).

Refusals are OpenAI-shaped errors naming the field: 404 ``invalid_room`` (a malformed room
name, or a room without a talk), ``unsupported_language``, ``lang_not_in_room`` (the talk is
not captioned in it), ``segment_not_found`` (no such talk or segment, or not published yet);
401 ``invalid_token`` (no access, a token of another talk: told the same whether or not
the room exists); 400 ``invalid_offset``; 503 ``room_bus_unavailable`` or
``transcript_unavailable`` (retry).
"""

from __future__ import annotations

import math
import re
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response

from app.api.errors import APIError
from app.api.state import ServerState
from app.api.viewer_routes import check_room_and_lang, no_viewer_access, room_access
from app.live.frames import safe_echo
from app.rooms.hls.playlist import (
    MAX_OFFSET_S,
    MEDIA_TYPE_PLAYLIST,
    MEDIA_TYPE_SEGMENT,
    clean_offset,
)
from app.rooms.hls.source import (
    EdgeMarks,
    HlsSource,
    HlsUnavailable,
    MemoryEdgeMarks,
    RedisEdgeMarks,
    TalkView,
)
from app.rooms.hls.timeline import HlsTiming
from app.rooms.transcripts.store import TalkRecord, retention_seconds

router = APIRouter()

PLAYLIST_PATH = "/v1/rooms/{room}/hls/{lang}.m3u8"
SEGMENT_PATH = "/v1/rooms/{room}/hls/{lang}/{talk}/{index}.vtt"
RETRY_AFTER_S = 5
TALK_ID = re.compile(r"[0-9a-f]{1,64}")
INDEX = re.compile(r"[0-9]{1,9}")
_TOKEN = re.compile(r"[0-9a-f]{32}")  # what a viewer token is: anything else is not echoed
# the query every rendition route takes
TokenQuery = Annotated[str | None, Query(description="the talk's viewer token (with API keys)")]
OffsetQuery = Annotated[str | None, Query(description="the video's presentation time (seconds) "
                                          "at the talk's start; default serve --hls-offset-s")]
SegmentOffsetQuery = Annotated[str | None, Query(description="as on the playlist")]
_OFFSET = re.compile(r"-?[0-9]{1,6}(?:\.[0-9]{1,9})?")


def _state(request: Request) -> ServerState:
    return request.app.state.livetrans


def _source(request: Request) -> HlsSource:
    """This application's source, made at the first request (the store opens at start-up)
    and kept: its caches and, without Redis, its live edges live in it."""
    state = _state(request)
    store = getattr(state, "transcripts", None)
    if store is None:  # not opened yet (start-up) or already closed
        raise unavailable("transcript store")
    source: HlsSource | None = getattr(request.app.state, "hls_source", None)
    if source is None or source.store is not store or source.bus is not state.bus:
        settings = state.settings
        marks: EdgeMarks
        client = getattr(state.bus, "redis", None)
        if client is not None:
            marks = RedisEdgeMarks(client, getattr(state.bus, "prefix", "livetrans"),
                                   retention_seconds(settings.rooms.transcript_retention_days))
        else:
            marks = MemoryEdgeMarks()
        source = HlsSource(state.rooms, state.bus, store,
                           HlsTiming(settings.hls.segment_s, settings.hls.window_s), marks)
        request.app.state.hls_source = source
    return source


def unavailable(what: str) -> APIError:
    """The 503 a player retries: the room bus or the transcript store is away."""
    code = "room_bus_unavailable" if what == "room bus" else "transcript_unavailable"
    return APIError(503, f"The {what} cannot be reached now; retry shortly.", code=code,
                    headers={"Retry-After": str(RETRY_AFTER_S)})


def rendition_offset(request: Request, offset: str | None) -> float:
    """The ``offset=`` of the request, else the server's (``serve --hls-offset-s``)."""
    if offset is None or offset == "":
        return clean_offset(_state(request).settings.hls.offset_s)
    try:
        if not _OFFSET.fullmatch(offset):  # plain decimals only: no 1e3, 1_0, inf, "١"
            raise ValueError(offset)
        return clean_offset(float(offset))
    except ValueError:
        raise APIError(400, f"Invalid offset '{safe_echo(offset, 32)}': a number of seconds "
                       f"from -{MAX_OFFSET_S:g} to {MAX_OFFSET_S:g}, the video's "
                       "presentation time at the talk's start.", param="offset",
                       code="invalid_offset") from None


def _lang_in_talk(record: TalkRecord, lang: str) -> None:
    if lang not in record.langs:
        langs = ", ".join(record.langs) or "no language"
        raise APIError(404, f"Room '{record.room}' is captioned in {langs}; lang '{lang}' is "
                       "not among them.", param="lang", code="lang_not_in_room")


def segment_query(token: str | None, offset: str | None, offset_s: float,
                  room_token: str | None = None) -> str:
    """The query a segment URI carries: the playlist's token and offset, both checked
    (a talk token of its shape, or the room token that admitted the request; the offset
    is a clean number)."""
    params = {}
    if token and (_TOKEN.fullmatch(token) or token == room_token):
        params["token"] = token
    if offset not in (None, ""):  # to the millisecond, as clean_offset keeps it
        params["offset"] = f"{offset_s + 0.0:.3f}".rstrip("0").rstrip(".")
    return "?" + urlencode(params) if params else ""


async def playlist_talk(request: Request, room: str, lang: str, token: str | None,
                         what: str) -> tuple[TalkRecord, TalkView, str | None]:
    """The talk a playlist request gets (the room's newest; with a talk's viewer token,
    the newest it admits to), whether it runs, and the room token that admitted the
    request; the 401 or 404 that says why there is none."""
    access = await room_access(request, room, token)
    operator = access.any_talk  # an API key, no keys, or a room viewer token: any talk
    if not operator and not token:
        raise no_viewer_access(what)
    state = _state(request)
    try:
        records, running = await _source(request).talks(room)
    except HlsUnavailable as exc:
        raise unavailable(exc.what) from None
    if operator:
        record = records[-1] if records else None
    else:
        record = next((r for r in reversed(records)
                       if state.rooms.token_ok_for_talk(room, r.talk_id, token)), None)
        if record is None:
            raise no_viewer_access(what)
    if record is None:
        raise APIError(404, f"Room '{room}' has no talk.", param="room", code="invalid_room")
    _lang_in_talk(record, lang)
    return record, TalkView(record, running == record.talk_id), access.room_token


def segment_access(request: Request, access_any_talk: bool, room: str, talk: str,
                   token: str | None, what: str) -> None:
    """A segment request's access: any talk, or the talk its viewer token admits to."""
    if not access_any_talk and not (
            TALK_ID.fullmatch(talk)
            and _state(request).rooms.token_ok_for_talk(room, talk, token)):
        raise no_viewer_access(what)


@router.get(
    PLAYLIST_PATH, summary="A room's live subtitles as an HLS WebVTT media playlist",
    response_class=Response,
    responses={200: {"description": "the media playlist",
                     "content": {MEDIA_TYPE_PLAYLIST: {}}}},
)
async def playlist(
    request: Request,
    room: str,
    lang: str,
    token: TokenQuery = None,
    offset: OffsetQuery = None,
) -> Response:
    lang = check_room_and_lang(room, lang)
    offset_s = rendition_offset(request, offset)
    record, view, room_token = await playlist_talk(request, room, lang, token,
                                                    "this room's subtitles")
    query = segment_query(token, offset, offset_s, room_token)
    try:
        body, ended = await _source(request).playlist(
            view, lang, lambda i: f"{lang}/{record.talk_id}/{i}.vtt{query}")
    except HlsUnavailable as exc:
        raise unavailable(exc.what) from None
    return Response(content=body, media_type=MEDIA_TYPE_PLAYLIST, headers={
        # a live playlist changes every segment; an ended one only if a late final lands
        "Cache-Control": "max-age=10" if ended else "no-cache",
        "X-Content-Type-Options": "nosniff",
        "X-Livetrans-Talk": record.talk_id,
    })


@router.get(
    SEGMENT_PATH, summary="One WebVTT segment of a room's HLS subtitles",
    response_class=Response,
    responses={200: {"description": "the WebVTT segment",
                     "content": {MEDIA_TYPE_SEGMENT.split(";")[0]: {}}}},
)
async def segment(
    request: Request,
    room: str,
    lang: str,
    talk: str,
    index: str,
    token: TokenQuery = None,
    offset: SegmentOffsetQuery = None,
) -> Response:
    lang = check_room_and_lang(room, lang)
    offset_s = rendition_offset(request, offset)
    access = await room_access(request, room, token)
    segment_access(request, access.any_talk, room, talk, token, "this room's subtitles")
    if not TALK_ID.fullmatch(talk) or not INDEX.fullmatch(index):
        raise no_segment(room, talk, index)
    source = _source(request)
    try:
        view = await source.talk(room, talk)
        if view is None:
            raise no_segment(room, talk, index)
        _lang_in_talk(view.record, lang)
        body = await source.segment(view, lang, int(index), offset_s)
    except HlsUnavailable as exc:
        raise unavailable(exc.what) from None
    if body is None:
        raise no_segment(room, talk, index)
    return Response(content=body, media_type=MEDIA_TYPE_SEGMENT, headers={
        # a published segment never changes (timeline)
        "Cache-Control": f"max-age={max(60, math.ceil(source.timing.window_s))}",
        "X-Content-Type-Options": "nosniff",  # a caption's markup is never run as a page
    })


def no_segment(room: str, talk: str, index: str) -> APIError:
    """The 404 of a segment that is not there (yet): any rendition's."""
    return APIError(404, f"Room '{room}' has no segment '{safe_echo(index, 12)}' of talk "
                    f"'{safe_echo(talk, 32)}' (not published yet, or past the talk's end).",
                    param="index", code="segment_not_found")
