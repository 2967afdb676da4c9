"""Translation requests -> backend jobs, shared by the HTTP endpoint and the WebSocket.

This is where a request's options become an update's job: the prompt is planned
(``app.translation.steps.prompt``), the draft comes from the session's ``plan_draft`` (or
from the client's ``prediction``), the drafter chain is assembled from the requested names,
and after the job ``Session.commit`` makes the new translation the next update's draft.

The path, one name per step: ``Translator.translate`` (the event loop: session, prompt,
draft plan) -> ``BackendRunner.run`` (where the model lives) -> ``run_update`` (the job, a
task on the event loop) -> ``app.translation.steps.pipeline.run_steps`` (draft, verify,
retry, cut, repair, display, commit: one module per step) -> ``await
TranslationBackend.generate`` (a future the model's scheduler completes). The backend is a
protocol (``app.translation.backend``); llama.cpp is its first implementation
(``app.translation.llama_backend``).

The names the steps moved out with stay importable from here (``__all__``), so the server,
the eval harness and the tests import them as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.engine.timings import current_timings
from app.translation.backend import (
    BackendRunner,
    GenerationRequest,
    GenerationResult,
    TranslationBackend,
)
from app.translation.framing import StreamCleaner
from app.translation.glossary import Term
from app.translation.options import (
    DEFAULT_OPTIONS,
    Hints,
    JobControl,
    TranslateOptions,
    UpdateSession,
)
from app.translation.pause import PauseTranslation, as_partial, keep
from app.translation.prompts import (
    PromptFormat,
    TranslationPrompt,
    render_plain_chat,
    tokenize_prompt,
)
from app.translation.sessions import DraftPlan, Session, SessionStore
from app.translation.steps.commit import commit_session, next_draft
from app.translation.steps.cut import cut_loop
from app.translation.steps.display import masked_tokens, shown_tokens
from app.translation.steps.draft import (
    GLOSSARY_BETA,
    continuation,
    trailing_punctuation,
    with_glossary,
)
from app.translation.steps.pipeline import run_steps
from app.translation.steps.prompt import PromptPlan, bounded_context, plan_prompt
from app.translation.steps.repair import GLOSSARY_START_BETA
from app.translation.steps.request import UpdateOutcome, UpdateRequest
from app.translation.steps.verdict import diagnose_output, ran_away
from app.translation.steps.verify import cleans, forced_answer, new_word, translation_token_cap
from drafters.chain import DEFAULT_ORDER

# What callers import from here; the options live in ``app.translation.options``, the
# steps of an update in ``app.translation.steps``.
__all__ = ["DEFAULT_OPTIONS", "GLOSSARY_BETA", "GLOSSARY_START_BETA", "Hints", "JobControl",
           "PromptPlan", "TranslateOptions", "TranslationOutcome", "Translator", "UpdateOutcome",
           "UpdateRequest", "UpdateSession", "bounded_context", "cleans", "continuation",
           "cut_loop", "diagnose_output", "forced_answer", "masked_tokens", "new_word",
           "next_draft", "plan_prompt", "ran_away", "run_update", "shown_tokens",
           "trailing_punctuation", "translation_token_cap", "update_beta", "with_glossary"]

ChainFactory = Callable[[list[str], str], object | None]

# ``Translator.translate``'s defaults: a stateless update, nothing given, a plain job
NO_SESSION, NO_HINTS, DEFAULT_JOB = UpdateSession(), Hints(), JobControl()

# A client's ``prediction`` has no history: under ``bias_scope="agreed"`` all of it is agreed.
PREDICTION_AGREED = 1 << 30


@dataclass
class TranslationOutcome:
    result: GenerationResult
    text: str
    display_text: str
    revision: int
    session_id: str | None
    is_final: bool
    queue_ms: float = 0.0
    extra: dict = field(default_factory=dict)
    pathology: str | None = None  # see ``app.translation.pathology``: what is wrong with it
    draft_dropped: str | None = None  # why this output is not the next draft
    retried: str | None = None  # a final translated again from scratch, and why
    # {"applied": n, "missed": [source terms]} when the request had a glossary
    glossary: dict | None = None
    # the tokens of ``text`` (for a display policy that counts tokens); None: the result's
    shown_tokens: list[int] | None = None
    # ``app.translation.pause``: "translated" (a partial heard at a pause, translated as
    # its final will be) or "reused" (a final that took that translation); None otherwise
    pause: str | None = None


def update_beta(opts: TranslateOptions, is_final: bool) -> float:
    """The beta an update is verified with (``Drafting.beta_for``)."""
    return opts.drafting.beta_for(is_final)


async def run_update(
    backend: TranslationBackend,
    prompt: TranslationPrompt,
    opts: TranslateOptions,
    is_final: bool,
    *,
    draft_tokens: list[int] | None = None,
    draft_text: str | None = None,
    chain: object | None = None,
    cancel: threading.Event | None = None,
    on_text: Callable[[str], None] | None = None,
    extra_draft: list[int] | None = None,
    draft_agreed: int | None = None,
    examples: list[tuple[str, str]] | None = None,
    retry_prompt: TranslationPrompt | None = None,
    terms: list[Term] | None = None,
    term_prompt: Callable[[list[str]], TranslationPrompt] | None = None,
    forced: Sequence[int] = (),
) -> UpdateOutcome:
    """One update on the backend, as a job: the exact code path of the server
    (``Translator.translate``'s job, a task on the event loop awaiting the step scheduler)
    and of the benchmarks (a ``StandaloneLlamaBackend``, driven by ``run_to_end``).

    The arguments are an ``UpdateRequest``'s fields (what each means is written there);
    the steps are ``app.translation.steps.pipeline.run_steps``'s: a pathological final is
    translated again with ``retry_prompt`` (kept only when clean) and cut where a loop or
    framing still starts; glossary ``terms`` are drafted where the model begins them and a
    final that misses one is repaired; a streamed update (``on_text``) is neither retried
    nor cut. ``forced`` (append-only text) starts every attempt's answer.
    """
    return await run_steps(backend, UpdateRequest(
        prompt=prompt, options=opts, is_final=is_final, draft_tokens=draft_tokens,
        draft_text=draft_text, chain=chain, cancel=cancel, on_text=on_text,
        extra_draft=extra_draft, draft_agreed=draft_agreed, examples=examples,
        retry_prompt=retry_prompt, terms=terms or [], term_prompt=term_prompt,
        forced=forced))


def outcome_of(update: UpdateOutcome, text: str, revision: int, session: Session | None,
               final: bool, opts: TranslateOptions) -> TranslationOutcome:
    """What a caller is told of a translated update (``Translator.translate``)."""
    return TranslationOutcome(
        result=update.result, text=text, display_text=update.display,
        revision=revision, session_id=session.session_id if session else None,
        is_final=final, pathology=update.pathology, draft_dropped=update.dropped,
        retried=update.retried, shown_tokens=update.shown_tokens,
        glossary=None if opts.glossary is None else {
            "applied": len(update.terms), "missed": update.missed},
    )


class Translator:
    """Runs translation updates on a backend (through its runner), with session drafts."""

    def __init__(
        self,
        runner: BackendRunner,
        prompt_format: PromptFormat,
        sessions: SessionStore,
        chain_factory: ChainFactory | None = None,
        chat_renderer: Callable[[list[dict[str, str]]], TranslationPrompt] | None = None,
        max_context_chars: int = 2000,
    ) -> None:
        self.max_context_chars = max_context_chars
        self.runner = runner
        self.prompt_format = prompt_format
        self.sessions = sessions
        self.chain_factory = chain_factory
        self.chat_renderer = chat_renderer or render_plain_chat

    async def translate(
        self,
        source: str,
        opts: TranslateOptions,
        *,
        is_final: bool | None = None,
        session: UpdateSession = NO_SESSION,
        hints: Hints = NO_HINTS,
        job: JobControl = DEFAULT_JOB,
    ) -> TranslationOutcome:
        """Translate one update. With a session, its previous translation is the draft.

        ``is_final`` defaults to True for a stateless request and False in a session.
        ``session`` says whose session the update belongs to (one the caller holds, or an
        id acquired here) and the client's update counter; ``hints`` what the caller has of
        the answer (a prediction, a stateless request's context, append-only text's forced
        start: the outcome's text starts with it); ``job`` how the backend runs it
        (``app.translation.options`` says what each field means).
        """
        final = session.stateless if is_final is None else is_final
        measured = current_timings.get()
        t_start = time.perf_counter()
        held = session.session
        acquired = False
        if held is None and session.session_id is not None:
            held = self.sessions.acquire(session.session_id, session.owner)
            acquired = True
        try:
            # a partial heard at a pause is translated as its final will be
            # (``app.translation.pause``); never a streamed one
            pausing = (hints.likely_final and not final and held is not None
                       and job.on_text is None)
            request, streamed = self._request(source, opts, final or pausing, held, hints,
                                              job)
            if measured is not None:
                measured.since("prompt_ms", t_start)
            kept = self._kept_for(held, request) if final else None
            if kept is not None:
                update = kept
            else:
                update = await self._run(request, job, held if pausing else None)
            t_done = time.perf_counter()
            text = update.result.text.strip() if update.caption is None else update.caption
            if streamed is not None:
                streamed.finish(text)
            revision = commit_session(held, source, update, text, final, opts.languages,
                                      session.seq)
            outcome = outcome_of(update, text, revision, held, final, opts)
            outcome.pause = "reused" if kept is not None else "translated" if pausing else None
            if measured is not None:
                measured.since("finish_ms", t_done)
            return outcome
        finally:
            if acquired and held is not None:
                self.sessions.release(held)

    async def _run(self, request: UpdateRequest, job: JobControl,
                   pausing: Session | None) -> UpdateOutcome:
        """The update's job on the backend. ``pausing``: the session of a partial heard at
        a pause, translated as a final; that outcome is kept there for the final, and the
        partial's caption made from it."""

        async def run(backend: TranslationBackend) -> UpdateOutcome:
            update = await run_steps(backend, request)
            if pausing is None:
                return update
            pausing.pause_translation = keep(request, update)
            return as_partial(backend, request, update)

        return await self.runner.run(
            run, priority=job.priority, cancel=job.cancel, bypass_limit=job.bypass_limit,
            started=job.started, queue_seq=job.queue_seq,
        )

    @staticmethod
    def _kept_for(session: Session | None, request: UpdateRequest) -> UpdateOutcome | None:
        """The final's outcome as translated at the pause before it, when it serves
        ``request`` (``PauseTranslation.serves``); taken once."""
        kept = session.pause_translation if session is not None else None
        if not isinstance(kept, PauseTranslation) or request.on_text is not None:
            return None
        session.pause_translation = None
        return kept.outcome if kept.serves(request) else None

    def _request(self, source: str, opts: TranslateOptions, final: bool,
                 session: Session | None, hints: Hints,
                 job: JobControl) -> tuple[UpdateRequest, StreamCleaner | None]:
        """The update's job, planned on the event loop: the draft plan, the prompt (with a
        session's previous finals as context unless the request brought its own), the
        drafter chain, and a streamed answer's cleaner (the stream is cleaned too)."""
        prediction, context, on_text = hints.prediction, hints.context, job.on_text
        plan = self._plan(session, opts, prediction)
        if context is None and session is not None:
            context = session.context(opts.target_lang, opts.source_lang, opts.context)
        p = plan_prompt(self.prompt_format, source, opts, context or [], final,
                        self.max_context_chars)
        chain = self._chain(opts)
        streamed = None
        if on_text is not None and cleans(p.prompt, opts):
            streamed = StreamCleaner(on_text, p.prompt.source, opts.target_lang)
            on_text = streamed.feed
        return UpdateRequest(
            prompt=p.prompt, options=opts, is_final=final,
            draft_tokens=plan.tokens if prediction is None else None, draft_text=prediction,
            chain=chain, cancel=job.cancel, on_text=on_text, draft_agreed=plan.agreed,
            examples=p.examples, retry_prompt=p.retry, terms=p.terms or [],
            term_prompt=p.term_prompt, forced=hints.forced), streamed

    @staticmethod
    def _plan(session: Session | None, opts: TranslateOptions,
              prediction: str | None) -> DraftPlan:
        """The draft of an update: the session's plan when the ``previous`` drafter is on.

        A client's ``prediction`` replaces it (its text is tokenized on the engine thread,
        so the plan has no tokens); it has no history, so all of it counts as agreed.
        """
        if prediction is not None:
            return DraftPlan(agreed=PREDICTION_AGREED)
        if session is not None and opts.uses("previous"):
            return session.plan_draft(opts.target_lang, opts.source_lang)
        return DraftPlan()

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: tuple[str, ...] = (),
        prediction: str | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        started: threading.Event | None = None,
    ) -> TranslationOutcome:
        """A plain chat completion on the loaded model (no ``target_lang``)."""
        prompt = self.chat_renderer(messages)

        async def job(backend: TranslationBackend) -> GenerationResult:
            tokens = tokenize_prompt(prompt, backend.tokenize)
            draft = backend.tokenize(prediction, add_bos=False) if prediction else []
            return await backend.generate(GenerationRequest(
                prompt_tokens=tokens, max_tokens=max_tokens,
                stop_strings=tuple(prompt.stop_strings), client_stops=tuple(stop),
                draft=draft, beta=0.0,
                temperature=temperature, seed=seed, cancel=cancel, on_text=on_text,
            ))

        result = await self.runner.run(job, cancel=cancel, started=started)
        return TranslationOutcome(
            result=result, text=result.text.strip(), display_text=result.text.strip(),
            revision=1, session_id=None, is_final=True,
        )

    def _chain(self, opts: TranslateOptions) -> object | None:
        if self.chain_factory is None:
            return None
        names = list(opts.drafters if opts.drafters is not None else DEFAULT_ORDER)
        if not names:
            return None
        return self.chain_factory(names, opts.target_lang)
