"""The room's interpreter voice as HLS audio renditions, one per language
(docs/room-voice.md), beside the talk's subtitle renditions (``app.rooms.hls.route``):

    GET /v1/rooms/{room}/voice/{lang}.m3u8[?token=VIEWER_TOKEN][&offset=SECONDS]
    GET /v1/rooms/{room}/voice/{lang}/{talk}/{index}.aac[?token=...][&offset=...]

A player gets the talk, the access and the clock the subtitles give it: the talk, the
refusals and the offset are the subtitle routes' (``playlist_talk``, ``segment_access``,
``rendition_offset``), so a voice and its subtitles always belong to the same talk and line
up. What is served is this package's: the segments from the store every replica reads
(``segments``), the playlist and each segment's ID3 timestamp (``playlist``).

Refusals beside the subtitles' ones: 404 ``voice_not_in_room`` (the talk has no voice in
that language); 503 ``room_bus_unavailable`` when the voice's store (the bus's Redis) is away.
This module sits in the API layer (the server state, the OpenAI shape of errors), so nothing
in the package imports it: the server mounts it (tests/test_import_layers.py).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from typing import TypeVar

from fastapi import APIRouter, Request, Response

from app.api.errors import APIError
from app.api.state import ServerState
from app.api.viewer_routes import check_room_and_lang, room_access
from app.rooms.hls.playlist import MEDIA_TYPE_PLAYLIST
from app.rooms.hls.route import (
    INDEX,
    TALK_ID,
    OffsetQuery,
    SegmentOffsetQuery,
    TokenQuery,
    no_segment,
    playlist_talk,
    rendition_offset,
    segment_access,
    segment_query,
    unavailable,
)
from app.rooms.voice.playlist import MEDIA_TYPE_SEGMENT as MEDIA_TYPE_AUDIO
from app.rooms.voice.playlist import id3_timestamp
from app.rooms.voice.playlist import render_playlist as render_voice_playlist

router = APIRouter()
T = TypeVar("T")

VOICE_PLAYLIST_PATH = "/v1/rooms/{room}/voice/{lang}.m3u8"
VOICE_SEGMENT_PATH = "/v1/rooms/{room}/voice/{lang}/{talk}/{index}.aac"


def _state(request: Request) -> ServerState:
    return request.app.state.livetrans


async def _voice_call(op: Awaitable[T]) -> T:
    """A room voice store operation; Redis away is a 503 the player retries."""
    from app.rooms.voice.redis_segments import VoiceStoreUnavailable

    try:
        return await op
    except VoiceStoreUnavailable:
        raise unavailable("room bus") from None


@router.get(
    VOICE_PLAYLIST_PATH, summary="A room's interpreter voice as an HLS audio media playlist",
    response_class=Response,
    responses={200: {"description": "the media playlist",
                     "content": {MEDIA_TYPE_PLAYLIST: {}}}},
)
async def voice_playlist(
    request: Request,
    room: str,
    lang: str,
    token: TokenQuery = None,
    offset: OffsetQuery = None,
) -> Response:
    lang = check_room_and_lang(room, lang)
    offset_s = rendition_offset(request, offset)
    record, view, room_token = await playlist_talk(request, room, lang, token,
                                                    "this room's voice")
    state = _state(request)
    track = await _voice_call(state.voice_segments().index(room, record.talk_id, lang))
    if track is None:
        raise APIError(404, f"Room '{room}' has no voice in '{lang}' (its speaker's start "
                       "names the room's voices: \"voices\").", param="lang",
                       code="voice_not_in_room")
    if not view.running and not track.ended:  # its replica stopped without an end
        track = replace(track, ended=True)
    query = segment_query(token, offset, offset_s, room_token)
    settings = state.settings
    body = render_voice_playlist(track, settings.hls.segment_s, settings.hls.window_s,
                                 lambda i: f"{lang}/{record.talk_id}/{i}.aac{query}")
    return Response(content=body, media_type=MEDIA_TYPE_PLAYLIST, headers={
        "Cache-Control": "max-age=10" if track.ended else "no-cache",
        "X-Content-Type-Options": "nosniff",
        "X-Livetrans-Talk": record.talk_id,
    })


@router.get(
    VOICE_SEGMENT_PATH, summary="One AAC segment of a room's HLS interpreter voice",
    response_class=Response,
    responses={200: {"description": "ADTS AAC with its ID3 timestamp",
                     "content": {MEDIA_TYPE_AUDIO: {}}}},
)
async def voice_segment(
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
    segment_access(request, access.any_talk, room, talk, token, "this room's voice")
    if not TALK_ID.fullmatch(talk) or not INDEX.fullmatch(index):
        raise no_segment(room, talk, index)
    segment = await _voice_call(
        _state(request).voice_segments().get(room, talk, lang, int(index)))
    if segment is None:
        raise no_segment(room, talk, index)
    return Response(content=id3_timestamp(offset_s + segment.first_s) + segment.audio,
                    media_type=MEDIA_TYPE_AUDIO, headers={
                        "Cache-Control": "max-age=3600",  # a published segment never changes
                        "X-Content-Type-Options": "nosniff"})
