"""OpenAI's Realtime Translation API (API.md, "OpenAI's realtime translation API").

    WebSocket /v1/realtime/translations?model=M     the session (``app.live.realtime``)
    POST /v1/realtime/translations/client_secrets   a short-lived secret for a browser
    POST /v1/realtime/translations/calls            the same session over WebRTC: an SDP
                                                    offer in, the answer out (201)
    POST /v1/realtime/translations/calls/{id}/hangup  ends a call (its API key only)

The WebSocket checks the origin, the credential (an API key, or a client secret that
also carries the session's starting configuration) and the model, then hands the socket
to the session. Every refusal is accepted first, told in an ``error`` event, then closed
(1008): the SDK reads the reason instead of a bare 403, and its retry logic sees why.
A call (``app.live.realtime.webrtc``) checks the same things and answers a refusal as an
OpenAI-shaped HTTP error; it takes the credential from ``Authorization`` only (a browser's
``fetch`` can set it), so the middleware lets the path through to this route's check.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response, WebSocket, WebSocketDisconnect

from app.api.errors import APIError
from app.api.http.auth import bearer_key, owner_of
from app.api.http.origins import origin_allowed
from app.api.state import ServerState
from app.live.frames import encode_frame, safe_echo
from app.live.limits import CLOSE_POLICY, CLOSE_TRY_AGAIN
from app.live.peer import IceOptions, OfferError, check_offer
from app.live.realtime import events
from app.live.realtime.client_events import ClientEventError, parse_session_fields
from app.live.realtime.client_secrets import (
    DEFAULT_TTL_S,
    MAX_TTL_S,
    MIN_TTL_S,
    ClientSecrets,
    SecretRefused,
)
from app.live.realtime.session import RealtimeSession, Voices
from app.live.realtime.session_state import SessionConfig, language_checker
from app.live.realtime.voice_out import VoiceSource
from app.voice.base import VoiceUnavailable
from app.voice.registry import VoiceRegistry

router = APIRouter()

PATH = "/v1/realtime/translations"
KEY_PROTOCOL = "openai-insecure-api-key."  # a browser's credential, as a subprotocol
RETRY_AFTER_S = 5


def _secrets(state: ServerState, app: Any) -> ClientSecrets:
    """The server's client secrets, made once per app from its API keys."""
    made = getattr(app.state, "realtime_secrets", None)
    if made is None:
        made = ClientSecrets(state.auth.api_keys)
        app.state.realtime_secrets = made
    return made


def _config(state: ServerState, model: str, raw: dict[str, Any],
            prefix: str = "session") -> SessionConfig:
    """A new session's configuration from a ``session`` object (``ClientEventError``)."""
    fields = parse_session_fields(raw, prefix)
    return SessionConfig(model=model).updated(fields, raw, language_checker(state.unserved))


def _subprotocol(ws: WebSocket) -> tuple[str | None, str]:
    """(the subprotocol to answer, the credential it carries): browsers, which cannot set
    headers, offer ``["realtime", "openai-insecure-api-key.KEY"]`` as OpenAI's docs show;
    a browser drops a socket whose answer names none of the offered subprotocols."""
    offered = [str(p) for p in ws.scope.get("subprotocols") or []]
    credential = next((p[len(KEY_PROTOCOL):] for p in offered
                       if p.startswith(KEY_PROTOCOL)), "")
    chosen = "realtime" if "realtime" in offered else (offered[0] if offered else None)
    return chosen, credential


async def _accept(ws: WebSocket) -> None:
    await ws.accept(subprotocol=_subprotocol(ws)[0])


async def _refuse(ws: WebSocket, code: str, message: str, close: int = CLOSE_POLICY,
                  param: str | None = None) -> None:
    try:
        await _accept(ws)
        await ws.send_text(encode_frame(events.error_event(code, message, param=param)))
        await ws.close(code=close, reason=code)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


def _grant(state: ServerState, app: Any, credential: str) -> tuple[str | None,
                                                                     dict[str, Any]]:
    """(owner, the session's starting configuration) of a credential: a client secret
    carries its configuration, an API key none; ``SecretRefused`` for a forged, expired
    or unknown one. Without API keys everything is open and nothing has an owner."""
    if credential.startswith("ek_"):
        grant = _secrets(state, app).read(credential, time.time())
        return grant.owner, grant.session
    if state.auth.api_keys:
        if credential not in state.auth.api_keys:
            raise SecretRefused("invalid_api_key", "Incorrect or missing API key.")
        return owner_of(credential), {}
    return None, {}


@router.websocket(PATH)
async def translations(ws: WebSocket) -> None:
    state: ServerState = ws.app.state.livetrans
    if not origin_allowed(ws, state.settings):
        await _refuse(ws, "origin_not_allowed", "this Origin may not open sessions")
        return
    credential = bearer_key(ws.headers.get("authorization", "")) or \
        ws.query_params.get("api_key", "") or _subprotocol(ws)[1]
    try:
        owner, initial = _grant(state, ws.app, credential)
    except SecretRefused as exc:
        await _refuse(ws, exc.code, exc.message)
        return
    model = ws.query_params.get("model", "")
    if not model:
        await _refuse(ws, "missing_model", "the 'model' query parameter is required "
                      "(wss://.../v1/realtime/translations?model=...)", param="model")
        return
    if model not in state.model_aliases:
        await _refuse(ws, "model_not_found", f"The model '{safe_echo(model, 64)}' does not "
                      f"exist; this server serves '{state.model_id}'.", param="model")
        return
    if not state.live_services().ready():
        await _refuse(ws, "not_ready", "the model is still loading (or the server is "
                      "shutting down); retry shortly", close=CLOSE_TRY_AGAIN)
        return
    try:
        config = _config(state, model, initial)
    except ClientEventError as exc:  # a secret minted before the server's languages changed
        await _refuse(ws, exc.code, exc.message, param=exc.param)
        return
    await _accept(ws)
    session = RealtimeSession(config, state.live_services(), owner, ws.send_text,
                              voices=_voices(state))
    try:
        code = await session.run(ws.receive)
        await ws.close(code=code)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


def _voices(state: ServerState) -> Voices:
    """A session's voice for its output language, from the server's voice registry
    (``app.voice.registry``: ``--voice``, ``--voice-engine``); None when nothing speaks
    the language (the session says so once and goes on with text)."""
    registry: VoiceRegistry = state.voices

    async def voice(lang: str, on_loss: Callable[[Any], None]) -> VoiceSource | None:
        try:
            await asyncio.to_thread(registry.resolve, lang)  # may start a process
        except VoiceUnavailable:
            return None
        return registry.stream(lang, on_loss=on_loss)

    return voice


def _ttl(body: dict[str, Any]) -> int:
    after = body.get("expires_after", {})
    if not isinstance(after, dict) or set(after) - {"anchor", "seconds"} \
            or after.get("anchor", "created_at") != "created_at":
        raise APIError(400, "expires_after is {\"anchor\": \"created_at\", \"seconds\": N}.",
                       param="expires_after", code="invalid_value")
    seconds = after.get("seconds", DEFAULT_TTL_S)
    if type(seconds) is not int or not MIN_TTL_S <= seconds <= MAX_TTL_S:
        raise APIError(400, f"expires_after.seconds must be whole seconds from {MIN_TTL_S} "
                       f"to {MAX_TTL_S}.", param="expires_after.seconds",
                       code="invalid_value")
    return seconds


@router.post(PATH + "/client_secrets")
async def client_secrets(request: Request) -> dict[str, Any]:
    """A client secret for a browser: Bearer auth with an API key (the middleware's), a
    ``session`` (its ``model`` and settings) and an optional ``expires_after``."""
    state: ServerState = request.app.state.livetrans
    try:
        body = json.loads(await request.body() or b"{}")
    except (ValueError, RecursionError):
        raise APIError(400, "The body must be a JSON object.", code="invalid_json") from None
    if not isinstance(body, dict) or set(body) - {"session", "expires_after"}:
        raise APIError(400, "The body is {\"session\": {...}, \"expires_after\": {...}}.",
                       code="unknown_parameter")
    session = body.get("session")
    if not isinstance(session, dict):
        raise APIError(400, "'session' (with its 'model') is required.", param="session",
                       code="missing_required_parameter")
    model = session.get("model")
    if not isinstance(model, str) or model not in state.model_aliases:
        raise APIError(400, f"The model '{safe_echo(model, 64)}' does not exist; this "
                       f"server serves '{state.model_id}'.", param="session.model",
                       code="model_not_found")
    ttl = _ttl(body)
    try:
        config = _config(state, model, session)
    except ClientEventError as exc:
        raise APIError(400, exc.message, param=exc.param, code=exc.code) from None
    expires_at = int(time.time()) + ttl
    kept = {k: v for k, v in session.items() if k in ("audio", "livetrans")}
    key = bearer_key(request.headers.get("authorization", ""))
    value = _secrets(state, request.app).mint(key, kept, expires_at)
    return {"value": value, "expires_at": expires_at, "session": config.to_json()}


def _webrtc_available() -> bool:
    try:
        import aiortc  # noqa: F401
    except ImportError:
        return False
    return True


def _call_model(state: ServerState, request: Request, credential: str) -> str:
    """The call's model: ``?model=``, or the served one for a client secret (which was
    minted for a model this server serves); an API key must name it, as on the socket."""
    model = request.query_params.get("model", "")
    if not model and credential.startswith("ek_"):
        model = state.model_id
    if not model:
        raise APIError(400, "the 'model' query parameter is required with an API key "
                       "(POST /v1/realtime/translations/calls?model=...)", param="model",
                       code="missing_model")
    if model not in state.model_aliases:
        raise APIError(400, f"The model '{safe_echo(model, 64)}' does not exist; this "
                       f"server serves '{state.model_id}'.", param="model",
                       code="model_not_found")
    return model


@router.post(PATH + "/calls", status_code=201)
async def call(request: Request) -> Response:
    """A browser's WebRTC call: its SDP offer answered, the session started on it."""
    state: ServerState = request.app.state.livetrans
    credential = bearer_key(request.headers.get("authorization", ""))
    try:
        owner, initial = _grant(state, request.app, credential)
    except SecretRefused as exc:
        raise APIError(401, exc.message, code=exc.code) from None
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/sdp":
        raise APIError(415, "a call's offer is sent with Content-Type: application/sdp "
                       "(the SDP text of pc.createOffer())", code="unsupported_media_type")
    model = _call_model(state, request, credential)
    if not _webrtc_available():
        raise APIError(503, "this server cannot take WebRTC calls: pip install "
                       "'livetrans[speech]'", code="webrtc_unavailable")
    try:
        sdp = check_offer(await request.body())
    except OfferError as exc:
        raise APIError(400, exc.message, param="sdp", code=exc.code) from None
    try:
        config = _config(state, model, initial)
    except ClientEventError as exc:
        raise APIError(400, exc.message, param=exc.param, code=exc.code) from None
    if not state.live_services().ready():
        raise APIError(503, "the model is still loading (or the server is shutting down); "
                       "retry shortly", code="not_ready",
                       headers={"Retry-After": str(RETRY_AFTER_S)})
    from app.live.realtime.webrtc import CallRefused

    services, voices = state.live_services(), _voices(state)
    try:
        made, answer = await state.realtime_calls.open(
            sdp, lambda send, track: RealtimeSession(config, services, owner, send,
                                                     voices=voices, sink=track),
            owner, IceOptions.from_settings(state.settings))
    except OfferError as exc:
        raise APIError(400, exc.message, param="sdp", code=exc.code) from None
    except CallRefused as exc:
        status = 429 if exc.code == "too_many_calls" else 503
        raise APIError(status, exc.message, code=exc.code,
                       headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    return Response(answer, status_code=201, media_type="application/sdp",
                    headers={"Location": f"{PATH}/calls/{made.id}"})


@router.post(PATH + "/calls/{call_id}/hangup")
async def hang_up(call_id: str, request: Request) -> Response:
    """End a call from the server side (its API key's calls only)."""
    state: ServerState = request.app.state.livetrans
    made = state.realtime_calls.get(call_id, getattr(request.state, "owner", None))
    if made is None:
        raise APIError(404, "no call with this id (it ended, or never began)",
                       code="call_not_found")
    await state.realtime_calls.hang_up(made)
    return Response(status_code=200)
