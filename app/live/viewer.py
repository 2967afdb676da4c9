"""A room's viewer on ``WebSocket /v1/live/watch`` (API.md, "Events"): joining, the frames
it is sent, refusals. The route (``app.api.watch``) checks the origin and hands the socket
to ``watch``.

    /v1/live/watch?room=keynote-1&lang=de[&token=VIEWER_TOKEN]

The server sends ``{"type": "joined", "room", "lang", "recent": [...]}`` (the talk's latest
final captions of that language, newest last, bounded; on another replica's talk they come
from the room's stream on the bus), then the speaker's ``caption`` frames of
that language as they are made, then ``{"type": "ended"}`` when the speaker stops or
leaves, and closes (1000). A viewer may join before the talk starts and waits for it.

A viewer costs no engine time: it only forwards frames the speaker's connection already
encoded (``app.rooms.registry``). Each viewer has its own sender task and bounded queue, so a
slow viewer loses partial frames (never finals) and slows nobody; one whose finals pile
up past the bound is closed with 1013 (reconnecting gives it ``recent``). Viewers send
nothing: their messages are read (to notice a disconnect) and ignored.

Refusals are an ``error`` frame and a close code: 1008 (policy: bad room name, language or
token, disallowed origin; retrying will not help) or 1013 (too many viewers; try later).
With API keys a viewer needs a viewer token: the talk's (``ready`` gives it to the speaker;
it admits to that talk only) or a room viewer token the operator issued
(``app.rooms.viewer_tokens``; it admits to every talk of its room until it expires or is
revoked, so a viewer holding one may wait for a talk that has not started; a viewer it
admitted is ended, ``invalid_token``, within ``ROOM_TOKEN_RECHECK_S`` of its revocation or
expiry). An API key is not a viewer token, so viewers never hold a speaker's key.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import WebSocket, WebSocketDisconnect

from app.live.frames import encode_frame, log_unexpected, safe_echo
from app.live.limits import CLOSE_POLICY, CLOSE_TRY_AGAIN
from app.live.services import LiveServices
from app.rooms.bus import BusUnavailable, TalkInfo
from app.rooms.registry import (
    ROOM_MAX_CHARS,
    LanguageNotInRoomError,
    RoomRegistry,
    TooManyViewersError,
    Viewer,
    valid_room,
)
from app.rooms.viewer_tokens import (
    RoomViewerTokens,
    ViewerTokensUnavailable,
    looks_like_room_token,
)
from app.supervision import reraise_lost_cancel
from app.translation.prompts import UnsupportedLanguageError, check_language

log = logging.getLogger("livetrans.watch")

CLOSE_NORMAL = 1000
ROOM_TOKEN_RECHECK_S = 30.0  # a revoked or expired room token's viewers go within this


async def refuse_viewer(ws: WebSocket, close_code: int, code: str, message: str) -> None:
    """Accept, explain in an error frame, close: a browser sees the reason, where a refused
    handshake is a bare HTTP 403."""
    try:
        await ws.accept()
        await ws.send_text(encode_frame({"type": "error", "code": code, "message": message}))
        await ws.close(code=close_code, reason=code)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


async def _send_frames(ws: WebSocket, viewer: Viewer) -> None:
    """Forward the viewer's queue until the talk ends (``ended``, close 1000) or the viewer
    fell too far behind (close 1013)."""
    queue = viewer.queue
    while True:
        if queue.overflowed:
            await ws.close(code=CLOSE_TRY_AGAIN, reason="viewer too slow")
            return
        frame = queue.pop()
        if frame is not None:
            await ws.send_text(frame.text)
            continue
        if queue.closed:
            await ws.send_text(encode_frame({"type": "ended"}))
            await ws.close(code=CLOSE_NORMAL)
            return
        viewer.wake.clear()
        await viewer.wake.wait()


async def _drain_incoming(ws: WebSocket) -> None:
    """Read (and ignore) what the viewer sends, until it disconnects."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return


async def _recheck_room_token(tokens: RoomViewerTokens, registry: RoomRegistry,
                              viewer: Viewer, room: str, token: str) -> None:
    """A viewer a room token admitted is ended (an ``invalid_token`` frame, then ``ended``)
    once the operator revokes the token or it expires: checked every
    ``ROOM_TOKEN_RECHECK_S`` against the shared store, so a revocation on any replica
    reaches viewers on every replica without a message of its own. A store that cannot
    be asked ends nobody (an outage revokes nothing)."""
    while True:
        await asyncio.sleep(ROOM_TOKEN_RECHECK_S)
        try:
            if await tokens.check(room, token) is not None:
                continue
        except ViewerTokensUnavailable:
            reraise_lost_cancel()  # a cancel that came back as a Redis timeout stops here
            continue
        registry.end_viewer(viewer, "invalid_token", "this room viewer token was revoked or "
                            "has expired")
        return


def _has_local_speaker(services: LiveServices, room: str) -> bool:
    local = services.rooms.rooms.get(room)
    return local is not None and local.speaker is not None and not local.remote


async def watch(ws: WebSocket, services: LiveServices) -> None:
    """A viewer whose origin passed (``app.api.watch``): joined to its room's language until
    the talk ends or it leaves, or refused with an error frame and a close code."""
    params = ws.query_params
    room, lang_param, token = params.get("room", ""), params.get("lang", ""), params.get("token")
    if not valid_room(room):
        await refuse_viewer(ws, CLOSE_POLICY, "invalid_room",
                            f"room '{safe_echo(room, ROOM_MAX_CHARS)}': 1-{ROOM_MAX_CHARS} "
                            "characters of A-Z a-z 0-9 . _ -, starting with a letter or digit")
        return
    try:
        lang = check_language(lang_param[:16], "lang")
    except UnsupportedLanguageError:
        await refuse_viewer(ws, CLOSE_POLICY, "unsupported_language",
                            f"lang: unsupported language '{safe_echo(lang_param, 16)}'")
        return
    registry, bus = services.rooms, services.bus
    room_admitted = False  # a room viewer token: any talk of the room, one to come too
    if registry.tokens_required and looks_like_room_token(token):
        try:
            if services.room_tokens is None:
                raise ViewerTokensUnavailable("not open")
            room_admitted = await services.room_tokens.check(room, token) is not None
        except ViewerTokensUnavailable:
            await refuse_viewer(ws, CLOSE_TRY_AGAIN, "viewer_tokens_unavailable",
                                "the viewer token store cannot be reached now; retry shortly")
            return
    owner: TalkInfo | None = None
    if bus is not None and bus.shared and not _has_local_speaker(services, room):
        try:  # the talk may run on another replica: its finals so far come in first
            owner = await bus.current_talk(room)
            await bus.follow(room)  # last: it leaves the room for the join below
        except BusUnavailable:
            await refuse_viewer(ws, CLOSE_TRY_AGAIN, "room_bus_unavailable",
                                "the room bus cannot be reached now; retry shortly")
            return
    # No await from here until the viewer is in the room: the token is checked against
    # the talk it will watch, whatever changed during the awaits above.
    local = registry.rooms.get(room)
    talk_id = local.talk_id if local is not None and local.speaker is not None else None
    if talk_id is None and owner is not None:
        talk_id = owner.talk_id  # running elsewhere; its start is on its way
    if not room_admitted and not registry.token_ok_for_talk(room, talk_id, token):
        await refuse_viewer(ws, CLOSE_POLICY, "invalid_token",
                            "this room's talk needs a viewer token (token=...): the talk's, "
                            "given to the speaker in 'ready' (it admits to one talk only), or "
                            "a room viewer token the operator issued (unexpired, not revoked)")
        return
    limits = services.limits
    try:
        viewer, recent = registry.join(
            room, lang, max_viewers=limits.max_viewers,
            max_per_room=limits.max_viewers_per_room,
            queue_frames=limits.viewer_queue_frames, max_finals=limits.viewer_max_finals,
            talk_id=talk_id if registry.tokens_required and not room_admitted else None)
    except TooManyViewersError as exc:
        registry.forget_if_empty(room)
        await refuse_viewer(ws, CLOSE_TRY_AGAIN, "too_many_viewers", str(exc))
        return
    except LanguageNotInRoomError as exc:
        registry.forget_if_empty(room)
        await refuse_viewer(ws, CLOSE_POLICY, "lang_not_in_room", str(exc))
        return
    # joined before the first await: ``recent`` and the queue see each final exactly once
    sender: asyncio.Task | None = None
    reader: asyncio.Task | None = None
    recheck: asyncio.Task | None = None
    try:
        await ws.accept()
        await ws.send_text(encode_frame({
            "type": "joined", "room": room, "lang": lang, "recent": recent,
            "langs": list(viewer.room.langs) if viewer.room.speaker is not None else [],
        }))
        sender = asyncio.create_task(_send_frames(ws, viewer))
        reader = asyncio.create_task(_drain_incoming(ws))
        if room_admitted and services.room_tokens is not None:
            recheck = asyncio.create_task(
                _recheck_room_token(services.room_tokens, registry, viewer, room, str(token)))
        await asyncio.wait({sender, reader}, return_when=asyncio.FIRST_COMPLETED)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the viewer left
    finally:
        registry.leave(viewer)
        for task in (sender, reader, recheck):
            if task is None:
                continue
            if not task.done():
                task.cancel()
            elif not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                if not isinstance(exc, (WebSocketDisconnect, RuntimeError, OSError)):
                    log_unexpected(log, exc, "room viewer")
