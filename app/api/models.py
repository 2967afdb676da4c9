"""``GET /v1/models``, ``GET /health`` and ``GET /metrics``.

``/v1/models`` agrees with ``/health``: while the model loads (or the server shuts down, or
the engine cannot run) it answers 503 in OpenAI's error shape with Retry-After, as every
model-backed route does, so a client that lists models before it translates waits too.
"""

from __future__ import annotations

import time
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.schemas import ModelCard, ModelList
from app.api.state import ServerState, get_state

router = APIRouter()
_STARTED = int(time.time())
RETRY_AFTER_S = 2  # as app.api.state's 503 "not_ready"


@router.get("/v1/models")
async def list_models(request: Request) -> dict:
    state = get_state(request)
    state.require_ready()
    return ModelList(data=[ModelCard(id=state.model_id, created=_STARTED)]).model_dump()


@router.get("/v1/models/{model_id}")
async def get_model(model_id: str, request: Request) -> dict:
    from app.api.errors import APIError

    state = get_state(request)
    state.require_ready()
    if model_id not in state.model_aliases:
        raise APIError(404, f"The model '{model_id}' does not exist.", param="model",
                       code="model_not_found")
    return ModelCard(id=state.model_id, created=_STARTED).model_dump()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """Readiness for load balancers (open without a key).

    When the server has keys, a caller without a valid one learns only the status: queue
    depth and session count are other tenants' activity.
    """
    state = get_state(request)
    status = "ok" if state.ready else ("shutting_down" if state.shutting_down else "loading")
    error = state.load_error or _engine_error(state)
    if error:
        status = "error"
    body: dict = {"status": status}
    if getattr(request.state, "trusted", True):
        body.update(model=state.model_id,
                    queue_depth=state.backend_health().queue_depth,
                    sessions=len(state.sessions))
        if error:
            body["error"] = error
    if status == "ok":
        return JSONResponse(body)
    # a client may retry a server that loads or whose engine stalled; one shutting down
    # will not come back, and one whose model failed to load needs a person
    retry = {"Retry-After": str(RETRY_AFTER_S)} if status == "loading" else None
    return JSONResponse(body, status_code=503, headers=retry)


def _engine_error(state: ServerState) -> str | None:
    """One line when the engine's scheduler thread cannot continue: every job would fail,
    so the load balancer must stop sending work here."""
    broken = state.backend_health().broken
    return None if broken is None else f"engine unavailable: {broken}"


_STATIC = Path(__file__).resolve().parents[1] / "static"


@router.get("/live", include_in_schema=False)
async def live_page() -> FileResponse:
    """The caption web page (plain HTML + JS, talks to ``/v1/live``)."""
    return FileResponse(_STATIC / "live.html", media_type="text/html")


@router.get("/live/mic-worklet.js", include_in_schema=False)
async def mic_worklet() -> FileResponse:
    """The operator page's microphone: an AudioWorklet that turns the capture into 16 kHz
    16-bit PCM chunks for ``/v1/live`` (API.md "Speech in")."""
    return FileResponse(_STATIC / "mic-worklet.js", media_type="text/javascript")


@router.get("/pages/transcripts.js", include_in_schema=False)
async def transcripts_script() -> FileResponse:
    """The transcript downloads of both pages (one script, not a copy in each)."""
    return FileResponse(_STATIC / "transcripts.js", media_type="text/javascript")


@router.get("/pages/listen.js", include_in_schema=False)
async def listen_script() -> FileResponse:
    """The caption screen's listen button: the room's voice played from its HLS audio
    playlist (docs/room-voice.md)."""
    return FileResponse(_STATIC / "listen.js", media_type="text/javascript")


@router.get("/watch", include_in_schema=False)
async def watch_page() -> FileResponse:
    """The audience's caption screen (plain HTML + JS, talks to ``/v1/live/watch``; the room
    and language are URL parameters, the viewer token too where the server has keys)."""
    return FileResponse(_STATIC / "watch.html", media_type="text/html")


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = get_state(request)
    state.metrics.queue_depth.set(state.backend_health().queue_depth)
    state.metrics.active_sessions.set(len(state.sessions))
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
