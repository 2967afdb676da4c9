"""The FastAPI application: wiring, model loading, auth, request logging.

The model loads in a background thread after the server starts listening, so ``/health``
can answer 503 "loading" (and orchestrators can wait) instead of the port being closed; every
model-backed route answers 503 with Retry-After meanwhile. Each long start-up step is logged
as it begins and while it lasts, and one ``ready: serving ...`` line says when requests are
served (``app.startup_log``).

Middleware, outermost first: the request id (``X-Request-ID``: a well-formed client id is
kept, anything else replaced), auth + request log + metrics (every answer, 401 and 413
included, is logged and counted under its route template), CORS, the body size limit.
"""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager

from asgi_correlation_id import CorrelationIdMiddleware, correlation_id
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware

from app.api import chat, live, models, realtime, transcripts, watch
from app.api import viewer_tokens as room_viewer_tokens
from app.api.errors import error_response, install_error_handlers
from app.api.http.auth import Auth, invalid_api_key
from app.api.http.body_limit import BodySizeLimit
from app.api.http.hosts import AllowedHosts, default_allowed_hosts
from app.api.http.origins import cors_options
from app.api.http.redaction import install_log_redaction, new_request_id, valid_request_id
from app.api.http.route_labels import label_routes, route_label
from app.api.http.ws_access_log import WebSocketAccessLog
from app.api.state import ServerState
from app.engine.engine import Engine
from app.engine.scheduler import PRIORITY_NAMES, SchedulerConfig
from app.engine.worker import EngineWorker, client_identity
from app.live.listen import route as room_listen
from app.live.whip import route as whip
from app.loader import load_model
from app.model_files import DEFAULT_MODEL_ID, model_id_for, resolve_model_path
from app.rooms.audience import route as qr_codes
from app.rooms.hls import route as hls
from app.rooms.voice import route as room_voice
from app.settings import Settings
from app.startup_log import ReadyLine, describe_served, progress
from app.translation.llama_backend import LlamaRunner
from app.translation.prompts import LANGUAGE_NAMES, PromptFormat
from app.translation.prompts.prefixes import direction_prefix, served_directions
from app.translation.sessions import SessionStore
from app.translation.translator import Translator
from app.vocab_trim.auto import AutoTrim, served_model

log = logging.getLogger("livetrans.server")

def _warm_voices(state: ServerState) -> None:
    """Load the voices a talk will ask for, on the voices' thread (a Piper or Kokoro model
    takes seconds at its first phrase): those named by ``--voice``, and with ``--langs``
    every served language's. Nothing waits for it."""
    from app.voice.registry import parse_voice_entries

    langs = list(parse_voice_entries(state.settings.voice.voices))
    if state.langs_given and state.served_langs:
        langs += sorted(set(state.served_langs) - set(langs))
    if langs and state.settings.voice.engine != "none":
        state.voices.warm(langs)


def _hold_direction_prefixes(engine: Engine, fmt: PromptFormat, langs: Sequence[str]) -> None:
    """``--langs``: each served direction's prompt preamble decoded once, before the first
    job (``Engine.hold_prefixes``), so no direction's first update decodes it. A direction
    the prompt format cannot write is left to its first update."""
    tokenize = engine.rt.tokenize
    prefixes = []
    for source, target in served_directions(langs, LANGUAGE_NAMES):
        try:
            prefixes.append(direction_prefix(fmt, source, target, tokenize))
        except (KeyError, ValueError):
            log.debug("no prompt preamble held for %s-%s", source, target, exc_info=True)
    held = engine.hold_prefixes(prefixes)
    log.info("held %d direction preambles in the KV cache (%d tokens)",
             min(len(prefixes), engine.rt.n_seq), held)


def _load_engine(state: ServerState) -> str | None:
    """Load the model and build the worker and translator (runs in a thread); what it
    serves, for the ready line (None: it failed, ``state.load_error`` says why)."""
    settings = state.settings
    try:
        t0 = time.perf_counter()
        path = resolve_model_path(settings.model)
        trim = auto_trim_request(settings)
        if trim is None:
            served = served_model(path, None)
        else:
            # finding the cached copy reads the model's metadata (seconds); building it on
            # a first start, a minute or more: the progress lines say it is still working
            with progress(f"preparing {path.name} for --langs {','.join(trim.langs)}"
                          + ("" if trim.trim else " (--no-trim: its full vocabulary)")):
                served = served_model(path, trim)
        with progress(f"loading the model {served.path.name} from {served.path.parent}"):
            model = load_model(settings, model=str(served.path))
        runtime, fmt = model.runtime, model.prompt_format
        engine = Engine(runtime)
        if served.langs:
            _hold_direction_prefixes(engine, fmt, served.langs)
        metrics = state.metrics
        worker = EngineWorker(
            engine, max_queue=settings.scheduling.queue_size,
            scheduler=SchedulerConfig(step_tokens=settings.scheduling.step_tokens,
                                      prefill_chunk=settings.scheduling.prefill_chunk,
                                      crowded_proposals=settings.scheduling.crowded_proposals,
                                      crowded_draft=settings.scheduling.crowded_draft,
                                      final_draft=settings.scheduling.final_draft or None,
                                      final_steps=settings.scheduling.final_steps),
            max_queue_wait_s=settings.scheduling.max_queue_wait_s,
            on_step=metrics.observe_step,
            on_admit=lambda ticket, waited: metrics.observe_admission(
                PRIORITY_NAMES.get(ticket.priority, "other"), waited,
                preempted=ticket.gen.result.preemptions > 0 and ticket.ever_admitted),
            on_refuse=lambda reason: metrics.admission_refusals.labels(reason).inc(),
            on_restart=lambda task: metrics.task_restarts.labels(task).inc(),
        )
        from app.translation.drafting import ChainBuilder

        chains = ChainBuilder.from_settings(settings, runtime)
        backend = state.backend = LlamaRunner(worker)  # the seam: app.translation.backend
        state.served_langs = served.langs or model.served_languages
        state.langs_given = served.langs is not None
        state.translator = Translator(
            backend, fmt, state.sessions, chain_factory=chains.build,
            chat_renderer=model.render_chat, max_context_chars=settings.limits.max_context_chars)
        log.info("model %s loaded in %.1fs (prompt format: %s, drafters: %s, %d sequences)",
                 model.path.name, time.perf_counter() - t0, fmt.name, chains.describe(),
                 runtime.n_seq)
        langs = list(settings.languages.langs) if state.langs_given else state.served_langs
        return describe_served(langs, state.model_id, fmt.name, supported=LANGUAGE_NAMES)
    except Exception as exc:  # noqa: BLE001 - reported through /health and on_load_error
        log.debug("model failed to load", exc_info=True)
        state.load_error = "model failed to load: " + (" ".join(str(exc).split())
                                                       or type(exc).__name__)
        log.error("%s", state.load_error)
        return None


def auto_trim_request(settings: Settings) -> AutoTrim | None:
    """``--langs``, ``--no-trim`` and ``--corpus`` as the trim they ask for (None: no
    ``--langs``, the model is served as it is)."""
    if not settings.languages.langs:
        return None
    languages = settings.languages
    return AutoTrim(langs=tuple(languages.langs), corpora=tuple(languages.corpus_files()),
                    trim=not languages.no_trim)


async def _open_rooms(state: ServerState) -> None:
    """The room bus (``--room-bus``) and the transcript store: on Redis with the bus, else
    SQLite in ``--data-dir``. ``serve`` checked both before starting; here a failure stops
    the start-up."""
    from app.rooms.bus import open_room_bus
    from app.rooms.redis_client import is_sentinel
    from app.rooms.transcripts import open_transcripts
    from app.rooms.transcripts.recorder import TranscriptRecorder

    settings, metrics = state.settings, state.metrics
    metrics.bus_up.set(1)
    state.bus = open_room_bus(
        settings.rooms.bus, state.replica, lease_s=settings.rooms.lease_s,
        on_up=lambda up: metrics.bus_up.set(int(up)), on_error=metrics.bus_errors.inc,
        on_pending=metrics.bus_pending_finals.set,
        on_restart=lambda task: metrics.task_restarts.labels(task).inc(),
        on_skipped=metrics.bus_skipped_messages.inc)
    await state.bus.start(state.rooms)
    state.transcripts = open_transcripts(  # on the bus's Redis, if it has one
        settings.rooms.data_dir, state.bus.redis,
        retention_days=settings.rooms.transcript_retention_days,
        replicated=is_sentinel(settings.rooms.bus or ""))
    state.recorder = TranscriptRecorder(state.transcripts,
                                        on_line=metrics.transcript_lines.inc,
                                        on_error=metrics.bus_errors.inc,
                                        on_restart=lambda task: metrics.task_restarts.labels(
                                            task).inc())
    await state.recorder.start()
    # room viewer tokens live beside the transcripts: on the bus's Redis, else in --data-dir
    from app.rooms.viewer_tokens import RoomViewerTokens, open_viewer_tokens

    state.viewer_tokens = RoomViewerTokens(state.auth.api_keys, open_viewer_tokens(
        settings.rooms.data_dir, state.bus.redis, getattr(state.bus, "prefix", "livetrans"),
        replicated=is_sentinel(settings.rooms.bus or "")))


async def _close_rooms(state: ServerState) -> None:
    """Finals still waiting reach the transcript and the bus (within the grace time)."""
    grace = state.settings.scheduling.shutdown_grace_s
    if state.recorder is not None:
        await state.recorder.close(grace)
    await state.bus.close(grace)
    if state.viewer_tokens is not None:
        await state.viewer_tokens.store.close()


# What loads the translation backend on the loader thread: it sets ``state.backend`` (a
# ``BackendService``, app.translation.backend) and ``state.translator``, and says what the
# server serves for the ready line (None: it failed; ``state.load_error`` says why). The
# llama.cpp model (``_load_engine``) by default; tests/examples/test_plug_in_backend.py
# plugs in another.
BackendLoader = Callable[[ServerState], str | None]


def create_app(settings: Settings | None = None, load_in_background: bool = True,
               on_load_error: Callable[[str], None] | None = None,
               load_backend: BackendLoader = _load_engine) -> FastAPI:
    """The ASGI app. The model loads on a thread while the server starts (``/health`` says
    ``loading``); ``on_load_error`` is told if it fails (``serve`` then exits, one line).
    ``load_backend`` loads another translation backend instead of the llama.cpp model."""
    settings = settings or Settings()
    model_path = resolve_model_path(settings.model)
    model_id = settings.model_alias or model_id_for(model_path)
    state = ServerState(
        settings=settings,
        sessions=SessionStore(settings.limits.max_sessions, settings.limits.session_ttl_s),
        model_id=model_id,
        model_aliases={model_id, model_path.name, DEFAULT_MODEL_ID, "default", "livetrans"},
        auth=Auth.from_settings(settings),
    )

    # ``serve`` tells it where it listens (app.cli); the loader, what the model serves
    ready_line = ReadyLine()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        def load() -> None:
            served = load_backend(state)
            if served is not None:
                ready_line.loaded(served)
                _warm_voices(state)
            if state.load_error and on_load_error is not None:
                on_load_error(state.load_error)
            # what start-up made lives as long as the server: out of the collector's
            # way, so a full collection on the event loop does not walk it again
            gc.freeze()

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        if not load_in_background:
            loader.join()
        await _open_rooms(state)
        yield
        state.stop_taking_work()
        if state.backend is not None:
            await state.backend.shutdown(settings.scheduling.shutdown_grace_s)
        state.speech.close()
        state.voices.close()
        # the live connections have ended their talks: their pushes deliver what is left
        await state.push_flushes.wait(state.grace_left())
        await room_listen.close_listeners(app.state)
        await _close_rooms(state)
        # what start-up froze can go now: a process that runs several servers in turn
        # (benchmarks, the tests) would otherwise keep every stopped one's model for good
        gc.unfreeze()

    replica = state.replica = (settings.http.replica_id
                               or f"{socket.gethostname()}:{settings.http.port}")
    install_log_redaction()
    app = FastAPI(title="livetrans", version="0.1.0", lifespan=lifespan)
    app.state.livetrans = state
    app.state.ready_line = ready_line
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit, max_bytes=settings.http.max_body_bytes)
    app.add_middleware(CORSMiddleware, **cors_options(settings))

    @app.middleware("http")
    async def auth_and_log(request: Request, call_next):
        t0 = time.perf_counter()
        request.state.received = t0  # an update's timings start here (app.engine.timings)
        route = route_label(labelled, request.scope)
        access = state.auth.check_request(request)
        request.state.owner, request.state.trusted = access.owner, access.trusted
        if access.refused:
            response = error_response(invalid_api_key())
        else:
            # fair share in the engine: an API key's requests are one client's, else an IP's
            client_identity.set(f"key:{access.owner}" if access.owner else
                                f"ip:{request.client.host if request.client else '?'}")
            response = await call_next(request)
        elapsed = time.perf_counter() - t0
        response.headers["x-livetrans-replica"] = replica
        state.metrics.requests.labels(route, str(response.status_code)).inc()
        state.metrics.e2e_seconds.labels(route).observe(elapsed)
        log.info("request_id=%s %s %s -> %d (%.1f ms)", correlation_id.get(), request.method,
                 route, response.status_code, elapsed * 1000)
        return response

    app.add_middleware(WebSocketAccessLog, label=lambda scope: route_label(labelled, scope))
    app.add_middleware(AllowedHosts, allowed=settings.http.allowed_hosts or
                       default_allowed_hosts(settings.http.host))
    # outermost: every answer, a 401 included, carries the id its log line names
    app.add_middleware(CorrelationIdMiddleware, validator=valid_request_id,
                       generator=new_request_id)
    app.include_router(chat.router)
    app.include_router(models.router)
    app.include_router(live.router)
    app.include_router(watch.router)  # room viewers; the route checks its viewer token
    app.include_router(transcripts.router)  # ... and so does the transcript download
    app.include_router(qr_codes.router)  # ... and a room's QR codes; its printable page
    app.include_router(hls.router)  # ... and a room's HLS subtitle renditions
    app.include_router(room_voice.router)  # ... and its voice's HLS audio renditions
    app.include_router(room_listen.router)  # ... and its voice's WebRTC listeners
    app.include_router(room_viewer_tokens.router)  # room viewer tokens (API key)
    app.include_router(whip.router)  # WHIP publishers (Bearer auth, as /v1 routes)
    app.include_router(realtime.router)  # OpenAI's realtime translation (key or secret)
    labelled = label_routes([*hls.router.routes, *room_voice.router.routes,
                             *app.router.routes, *chat.router.routes, *models.router.routes,
                             *live.router.routes, *watch.router.routes,
                             *transcripts.router.routes, *qr_codes.router.routes,
                             *room_viewer_tokens.router.routes,
                             *whip.router.routes, *realtime.router.routes,
                             *room_listen.router.routes])
    return app
