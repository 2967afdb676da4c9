"""``POST /v1/rooms/{room}/voice/{lang}/whep``: listen to a room's voice within a second,
over WebRTC (WHEP, the WebRTC-HTTP egress protocol: the listener's offer in, the answer
out), from any replica (docs/room-voice.md, "Listening on a phone").

    POST /v1/rooms/keynote-1/voice/de/whep[?token=VIEWER_TOKEN]
    Content-Type: application/sdp          (a receive-only audio offer)
    -> 201 Created, the SDP answer, Location: /v1/rooms/keynote-1/voice/de/whep/<id>
    DELETE <Location>                       -> 200: the listener ends

Access is the room voice's HLS rendition's: an API key or a room viewer token hears the
room's every talk, the next one on the same connection; a talk's viewer token hears that
talk. The hub (``hub.RoomListeners``) is made at the first request and closed at shutdown.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response

from app.api.errors import APIError
from app.api.http.auth import bearer_key
from app.api.state import ServerState
from app.api.viewer_routes import check_room_and_lang, room_access
from app.live.listen.hub import ListenerReport, RoomListeners, TooManyListeners
from app.live.peer import IceOptions, NoUdpPort, OfferError, check_offer
from app.rooms.hls.route import TokenQuery, playlist_talk

router = APIRouter()
RETRY_AFTER_S = 5
PATH = "/v1/rooms/{room}/voice/{lang}/whep"
WHAT = "this room's voice"


def listeners(request: Request) -> RoomListeners:
    """This application's hub, made at the first listener on the current store's feed."""
    state: ServerState = request.app.state.livetrans
    live = state.voice_segments().live
    hub: RoomListeners | None = getattr(request.app.state, "room_listeners", None)
    if hub is None or hub.live is not live:
        metrics = state.metrics
        seen: set[str] = set()  # languages with a gauge: back to 0 when their last goes

        def observe(report: ListenerReport) -> None:
            seen.update(report.counts)
            for lang in seen:
                metrics.voice_listeners.labels(lang).set(report.counts.get(lang, 0))
            if report.skipped_pause_s:
                metrics.voice_listener_skipped_seconds.labels("pause").inc(
                    report.skipped_pause_s)
            if report.skipped_speech_s:
                metrics.voice_listener_skipped_seconds.labels("speech").inc(
                    report.skipped_speech_s)

        hub = RoomListeners(live, state.settings.live.max_listeners, observe)
        request.app.state.room_listeners = hub
    return hub


async def close_listeners(app_state: object) -> None:
    """Shutdown: every listener of this application ends."""
    hub: RoomListeners | None = getattr(app_state, "room_listeners", None)
    if hub is not None:
        await hub.close()


def _available() -> bool:
    try:
        import aiortc  # noqa: F401
    except ImportError:
        return False
    return True


def _owner(request: Request, state: ServerState) -> str | None:
    key = bearer_key(request.headers.get("authorization", ""))
    return state.auth.owner(key) if state.auth.api_keys and key else None


def _busy(code: str, message: str) -> APIError:
    return APIError(503, message, code=code, headers={"Retry-After": str(RETRY_AFTER_S)})


@router.post(PATH, status_code=201, summary="Listen to a room's voice over WebRTC (WHEP)",
             response_class=Response)
async def listen(request: Request, room: str, lang: str, token: TokenQuery = None) -> Response:
    state: ServerState = request.app.state.livetrans
    lang = check_room_and_lang(room, lang)
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/sdp":
        raise APIError(415, "a WHEP offer is sent with Content-Type: application/sdp",
                       code="unsupported_media_type")
    access = await room_access(request, room, token)
    talk: str | None = None
    if not access.any_talk:  # a talk's own token: that talk, when it has this language
        record, _view, _room_token = await playlist_talk(request, room, lang, token, WHAT)
        talk = record.talk_id
    if not _available():
        raise _busy("listen_unavailable", "this server cannot send WebRTC audio: pip "
                    "install 'livetrans[speech]'")
    try:
        sdp = check_offer(await request.body())
        listener, answer = await listeners(request).add(
            room, lang, talk, sdp, IceOptions.from_settings(state.settings),
            _owner(request, state))
    except OfferError as exc:
        raise APIError(400, exc.message, param="sdp", code=exc.code) from None
    except NoUdpPort as exc:
        raise _busy("no_udp_port", str(exc)) from None
    except TooManyListeners:
        raise _busy("too_many_listeners", "this replica has as many listeners as it takes "
                    f"({state.settings.live.max_listeners}); retry shortly, or listen "
                    f"through the HLS rendition ({room}/voice/{lang}.m3u8)") from None
    location = f"/v1/rooms/{quote(room)}/voice/{quote(lang)}/whep/{listener.id}"
    return Response(answer, status_code=201, media_type="application/sdp",
                    headers={"Location": location, "Cache-Control": "no-store"})


@router.delete(PATH + "/{resource}", summary="Stop listening (WHEP)")
async def stop(request: Request, room: str, lang: str, resource: str) -> Response:
    state: ServerState = request.app.state.livetrans
    hub: RoomListeners | None = getattr(request.app.state, "room_listeners", None)
    listener = None if hub is None else hub.get(room, resource, _owner(request, state))
    if hub is None or listener is None or listener.lang != lang:
        raise APIError(404, "no listener at this address (it ended, or never began)",
                       code="listener_not_found")
    await hub.remove(listener)
    return Response(status_code=200)
