"""``POST /v1/chat/completions``: OpenAI chat completions, plus translation mode (API.md).

Everything that can be rejected is rejected before the first byte of a stream is sent
(model, languages, sizes, session busy), so those errors keep their HTTP status. A client
that disconnects mid-stream cancels the generation at the next forward pass.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Request, Response
from sse_starlette.sse import EventSourceResponse

from app.api.errors import (
    APIError,
    ClientDisconnected,
    error_body,
    map_engine_error,
)
from app.api.http.affinity import check_session_affinity
from app.api.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    CompletionTokensDetails,
    Delta,
    DraftCounts,
    LivetransInfo,
    PromptTokensDetails,
    Usage,
)
from app.api.state import ServerState, get_state
from app.translation.backend import GenerationResult, UpdateTimings, current_timings
from app.translation.prompts import UnsupportedLanguageError, check_language
from app.translation.sessions import (
    SESSION_ID_MAX_CHARS,
    SESSION_ID_PATTERN,
    Session,
    SessionBusyError,
    SessionStoreFullError,
    StaleUpdateError,
)
from app.translation.translator import (
    Hints,
    JobControl,
    TranslateOptions,
    TranslationOutcome,
    UpdateSession,
)

router = APIRouter()

def _usage(result: GenerationResult) -> Usage:
    """OpenAI's usage; its prediction counts are every draft source's (``result.drafts``)."""
    drafts = result.drafts
    return Usage(
        prompt_tokens=result.prompt_tokens,
        completion_tokens=len(result.tokens),
        total_tokens=result.prompt_tokens + len(result.tokens),
        prompt_tokens_details=PromptTokensDetails(cached_tokens=result.prompt_tokens_cached),
        completion_tokens_details=CompletionTokensDetails(
            accepted_prediction_tokens=drafts.total_accepted,
            rejected_prediction_tokens=drafts.total_proposed - drafts.total_accepted,
        ),
    )


def livetrans_info(outcome: TranslationOutcome,
                   measured: UpdateTimings | None = None) -> LivetransInfo:
    """The ``livetrans`` object; every draft count in it is read from ``result.drafts``;
    ``timings`` is where the update's time went (``app.translation.backend.UpdateTimings``)."""
    r = outcome.result
    counts = r.drafts.summary(len(r.tokens))
    return LivetransInfo(
        session_id=outcome.session_id,
        revision=outcome.revision,
        display_text=outcome.display_text,
        **{name: counts[name] for name in ("draft_tokens", "accepted_tokens", "new_tokens",
                                           "ssbd_draft_tokens", "ssbd_accepted_tokens")},
        drafts=DraftCounts(**counts["drafts"]),
        forward_passes=r.forward_passes,
        decode_ms=round(r.decode_ms, 2),
        is_final=outcome.is_final,
        queue_ms=round(outcome.queue_ms, 2),
        pathology=outcome.pathology,
        draft_dropped=outcome.draft_dropped,
        retried=outcome.retried,
        glossary=outcome.glossary,
        timings=measured.report() if measured is not None else None,
    )


def message_pairs(messages: list) -> list[tuple[str, str]]:
    """(source, translation) pairs of a conversation before its last user message: each
    user message answered by the assistant message right after it. The texts are data
    (the prompt format neutralises labels); a system message is no pair."""
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    pairs = []
    for i in range(last_user - 1):
        this, answer = messages[i], messages[i + 1]
        if this.role == "user" and answer.role == "assistant":
            src, tgt = this.text().strip(), answer.text().strip()
            if src and tgt:
                pairs.append((src, tgt))
    return pairs


class _Prepared:
    """A validated request: what to run, and the session it holds (if any)."""

    def __init__(self, body: ChatCompletionRequest, state: ServerState) -> None:
        self.body = body
        self.state = state
        self.session: Session | None = None
        self.source: str | None = None
        self.options: TranslateOptions | None = None
        self.session_id: str | None = None
        # a stateless request's context: its earlier (user, assistant) pairs
        self.context: list[tuple[str, str]] | None = None

    def release(self) -> None:
        if self.session is not None:
            self.state.sessions.release(self.session)
            self.session = None


def _prepare(
    body: ChatCompletionRequest, state: ServerState, header_session: str | None, owner: str | None
) -> _Prepared:
    settings = state.settings
    if body.model not in state.model_aliases:
        raise APIError(404, f"The model '{body.model}' does not exist; see /v1/models.",
                       param="model", code="model_not_found")
    limit = body.token_limit()
    max_tokens = min(limit or settings.limits.max_new_tokens, settings.limits.max_new_tokens)
    prep = _Prepared(body, state)
    total_chars = sum(len(m.text()) for m in body.messages)
    if total_chars > settings.limits.max_source_chars:
        raise APIError(413, f"Input is {total_chars} characters; the limit is "
                       f"{settings.limits.max_source_chars}.", param="messages", code="too_large")
    # A prediction is a draft of the output, verified in the same forward pass as the
    # prompt: it costs what a source of its length costs, so it gets the same limit.
    predicted = len(body.prediction.text()) if body.prediction is not None else 0
    if predicted > settings.limits.max_source_chars:
        raise APIError(413, f"The prediction is {predicted} characters; the limit is "
                       f"{settings.limits.max_source_chars}.", param="prediction", code="too_large")
    if body.target_lang is None:
        return prep
    try:
        target = check_language(body.target_lang, "target_lang")
        source_lang = check_language(body.source_lang, "source_lang")
    except UnsupportedLanguageError as exc:
        raise map_engine_error(exc) from exc
    unserved = state.unserved({"target_lang": target, "source_lang": source_lang})
    if unserved:
        raise APIError(400, unserved[1], param=unserved[0], code="language_not_served")
    users = [m for m in body.messages if m.role == "user"]
    if not users:
        raise APIError(400, "Translation mode needs a 'user' message with the source text.",
                       param="messages", code="missing_user_message")
    source = users[-1].text().strip()
    if not source:
        raise APIError(422, "The text to translate is empty.", param="messages",
                       code="empty_text")
    prep.source = source
    prep.context = message_pairs(body.messages) or None
    prep.options = body.translate_options(source_lang, target, max_tokens)
    prep.session_id = body.session_id or header_session
    return prep


async def _acquire_session(prep: _Prepared, owner: str | None) -> None:
    """Take the request's session. A busy session answers 409 to a partial update, but a
    final waits its turn (up to the request timeout): a final is never turned away."""
    body, state = prep.body, prep.state
    if prep.options is None or prep.session_id is None or body.prediction is not None:
        return
    try:
        if body.is_final:
            prep.session = await state.sessions.acquire_when_free(
                prep.session_id, owner, timeout=state.settings.http.request_timeout_s)
        else:
            prep.session = state.sessions.acquire(prep.session_id, owner)
    except (SessionBusyError, SessionStoreFullError) as exc:
        raise map_engine_error(exc) from exc
    try:
        # judged while holding the session: no other update of it can be applied meanwhile
        prep.session.check_newer(prep.source or "", bool(body.is_final), body.seq)
    except StaleUpdateError as exc:
        prep.release()
        raise map_engine_error(exc) from exc


async def _run(
    prep: _Prepared, cancel: threading.Event, on_text=None
) -> TranslationOutcome:
    """Run a translation or a plain chat completion through the engine."""
    state, body = prep.state, prep.body
    timeout = state.settings.http.request_timeout_s
    t0 = time.perf_counter()
    started = threading.Event()
    try:
        if prep.options is not None:
            assert prep.source is not None
            coro = state.translator.translate(
                prep.source, prep.options, is_final=body.is_final,
                session=UpdateSession(session=prep.session, seq=body.seq),
                hints=Hints(prediction=body.prediction.text() if body.prediction else None,
                            context=prep.context),
                job=JobControl(on_text=on_text, cancel=cancel, started=started),
            )
        else:
            limit = min(body.token_limit() or state.settings.limits.max_new_tokens,
                        state.settings.limits.max_new_tokens)
            coro = state.translator.chat(
                [{"role": m.role, "content": m.text()} for m in body.messages],
                max_tokens=limit, temperature=body.temperature or 0.0, seed=body.seed,
                stop=body.stop_list(),
                prediction=body.prediction.text() if body.prediction else None,
                on_text=on_text, cancel=cancel, started=started,
            )
        outcome = await asyncio.wait_for(coro, timeout)
    except TimeoutError as exc:
        cancel.set()
        if not started.is_set():
            # It never reached the engine: the server is overloaded, not slow (retry later).
            raise APIError(429, f"Server overloaded: the request waited {timeout:.0f} s in "
                           "the queue; retry shortly.", code="queue_timeout",
                           headers={"Retry-After": "5"}) from exc
        raise
    except BaseException:
        cancel.set()
        raise
    outcome.queue_ms = max(0.0, (time.perf_counter() - t0) * 1000 - outcome.result.decode_ms)
    state.metrics.observe_generation(outcome.result, route="chat")
    state.metrics.observe_verdict(outcome)
    return outcome


async def _until_disconnect(request: Request, coro, cancel: threading.Event):
    """Await ``coro`` unless the client disconnects first: then its generation is cancelled
    (it leaves the batch at the next step) instead of decoding for nobody.

    The request body has been read, so the next ASGI message is ``http.disconnect``: a
    task waiting for it is the disconnect signal (as Starlette's streaming responses do).
    """
    task = asyncio.create_task(coro)
    watcher = asyncio.create_task(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        cancel.set()
        task.cancel()
        raise ClientDisconnected("the client closed the connection")
    except asyncio.CancelledError:
        cancel.set()
        task.cancel()
        raise
    finally:
        watcher.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _finish(result: GenerationResult) -> str:
    return "length" if result.finish_reason == "length" else "stop"


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    x_session_id: str | None = Header(
        None, min_length=1, max_length=SESSION_ID_MAX_CHARS, pattern=SESSION_ID_PATTERN),
):
    state = get_state(request)
    measured = UpdateTimings(getattr(request.state, "received", None))
    t_handler = measured.since("parse_ms", measured.received)
    current_timings.set(measured)  # the tasks below inherit it
    state.require_ready()
    owner = getattr(request.state, "owner", None)
    prep = _prepare(body, state, x_session_id, owner)
    check_session_affinity(request.headers, prep.session_id)
    await _acquire_session(prep, owner)
    measured.since("prepare_ms", t_handler)
    completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
    created = int(time.time())
    model = state.model_id
    cancel = threading.Event()

    if not body.stream:
        try:
            outcome = await _until_disconnect(request, _run(prep, cancel), cancel)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise map_engine_error(exc) from exc
        finally:
            prep.release()
        result = outcome.result
        # serialized by pydantic-core in one call: FastAPI's jsonable_encoder walking the
        # dict again cost the event loop about half a millisecond an update (measured)
        return Response(ChatCompletion(
            id=completion_id, created=created, model=model,
            choices=[Choice(message=AssistantMessage(content=outcome.text),
                            finish_reason=_finish(result))],
            usage=_usage(result),
            livetrans=livetrans_info(outcome, measured) if prep.options is not None else None,
        ).model_dump_json(), media_type="application/json")

    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(**kwargs: Any) -> dict[str, str]:
        payload = ChatCompletionChunk(id=completion_id, created=created, model=model, **kwargs)
        return {"data": payload.model_dump_json()}

    async def events() -> AsyncIterator[dict[str, str]]:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[str | None] = asyncio.Queue()
        first_text = [True]

        def on_text(delta: str) -> None:
            loop.call_soon_threadsafe(pieces.put_nowait, delta)

        current_timings.set(measured)
        task = asyncio.create_task(_run(prep, cancel, on_text))
        task.add_done_callback(lambda _t: pieces.put_nowait(None))
        try:
            yield chunk(choices=[ChunkChoice(delta=Delta(role="assistant", content=""))])
            while (piece := await pieces.get()) is not None:
                if first_text[0] and prep.options is not None:
                    piece = piece.lstrip()  # the few-shot answer starts with a space token
                    if not piece:
                        continue
                first_text[0] = False
                yield chunk(choices=[ChunkChoice(delta=Delta(content=piece))])
            try:
                outcome = task.result()
            except BaseException as exc:  # noqa: BLE001 - reported in-stream
                err = map_engine_error(exc)
                yield {"data": json.dumps(error_body(err.status, err.message, err.param,
                                                     err.code))}
                return
            result = outcome.result
            info = livetrans_info(outcome, measured) if prep.options is not None else None
            yield chunk(choices=[ChunkChoice(delta=Delta(), finish_reason=_finish(result))],
                        livetrans=info)
            if include_usage:
                yield chunk(choices=[], usage=_usage(result))
            yield {"data": "[DONE]"}
        finally:
            if not task.done():
                cancel.set()  # client went away: stop at the next forward pass
                task.cancel()
            prep.release()

    return EventSourceResponse(events(), ping=15)
