"""From a speaker's updates to captions: one pipeline per target language, and the fan-out
that feeds them.

``LanguagePipeline`` is one target language of a live connection: its session (its own SSBD
draft), its options, its display policies (one per segment, ``app.translation.display``) and its
caption revisions. It translates one update and hands the caption to the publisher.

``FanOut`` owns the connection's ``SegmentQueue`` and translates queued updates one at a
time, each into every language at once (one engine job per language, awaited together so
the step engine decodes them in the same forward passes). While an update is translated,
newer partials replace the waiting one (coalescing), a partial that is stale before it
costs a forward pass is dropped, and a final stops a running partial; finals are never
dropped, so every final gets exactly one caption or one error frame per language. A partial
heard at a pause in the speech (``Update.pause``) is translated as its final will be, at a
final's rank (``app.translation.pause``): it stops a running partial as a final does, and
the final with its words lets it finish and takes its translation.

Where updates come from (the socket's reader today, a speech recogniser next) is not this
module's business: anything that calls ``submit`` is a source.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from app.failures import describe_failure
from app.live.frames import log_unexpected
from app.live.publisher import CaptionPublisher, ConnectionGone
from app.live.queue import SegmentQueue, Update
from app.live.services import LiveServices
from app.supervision import reraise_lost_cancel
from app.translation.backend import (
    PRIORITY_FINAL,
    PRIORITY_PARTIAL,
    GenerationResult,
    JobCancelledError,
    QueueFullError,
    UpdateTimings,
    current_timings,
)
from app.translation.commit_policy import CommitStep, SegmentCommits
from app.translation.commits import Commit
from app.translation.display import DisplayPolicy, Translation, display_policy, display_unit
from app.translation.sessions import Session
from app.translation.steps.append import append_step
from app.translation.translator import Hints, JobControl, TranslateOptions, UpdateSession

log = logging.getLogger("livetrans.live")

MAX_POLICIES = 64  # display policies kept per language ((segment) keys)


def draft_stats(result: GenerationResult) -> dict[str, Any]:
    """A caption's draft counts, all read from ``result.drafts``: the totals and SSBD-only
    fields clients have always read, and ``drafts`` (proposed / accepted by source)."""
    return result.drafts.summary(len(result.tokens))


class LanguagePipeline:
    def __init__(self, lang: str, session: Session, options: TranslateOptions,
                 display_mode: str, detokenize: Callable[[list[int]], str],
                 token_bytes: Callable[[int], bytes] | None = None,
                 append: bool = False) -> None:
        self.lang = lang
        self.session = session
        self.options = options
        self.display_mode = display_mode
        self.detokenize = detokenize
        # a final of one segment may be queued while partials of the next are shown, so
        # one display policy per segment, dropped after its final
        self.policies: dict[int, DisplayPolicy] = {}
        self.revisions: dict[int, int] = {}
        # append-only text (``"display": "append"``): each open segment's committed text,
        # forced as the start of its later updates and its final (``app.translation.commit_policy``)
        self.append = append
        self.token_bytes = token_bytes or (lambda token: detokenize([token]).encode())
        self.commits: dict[int, SegmentCommits] = {}

    async def caption(self, update: Update, fan: FanOut, started: float,
                        cancel: threading.Event, begun: threading.Event,
                        seq: int | None) -> bool:
        """Translate ``update`` and publish its caption, or one error frame naming the
        segment and the language. True when the job was cancelled (a superseded partial):
        nothing is sent then."""
        services, out = fan.services, fan.publisher
        measured = UpdateTimings(update.received)
        measured.since("parse_ms", update.received)  # the frame read, parsed and queued
        current_timings.set(measured)  # this task's own context (one per language)
        commits = self.segment_commits(update.segment) if self.append else None
        forced = commits.forced() if commits is not None and commits.tokens else ()
        try:
            outcome = await services.translate(
                update.text, self.options, is_final=update.final,
                session=UpdateSession(session=self.session),
                hints=Hints(forced=forced, likely_final=update.pause),
                # a partial heard at a pause does the final's work early: a final's rank
                job=JobControl(priority=PRIORITY_FINAL if update.final or update.pause
                               else PRIORITY_PARTIAL,
                               bypass_limit=update.final, cancel=cancel, started=begun,
                               queue_seq=seq),
            )
        except JobCancelledError:
            if update.final:  # finals are never superseded; should it happen, say so
                await out.error("cancelled", "the final was cancelled",
                                segment=update.segment, final=True, lang=self.lang)
                return False
            return True
        except QueueFullError:
            await out.error("overloaded", "server busy; partial dropped",
                            segment=update.segment, final=update.final, lang=self.lang)
            return False
        except Exception as exc:  # noqa: BLE001 - reported as an error frame
            err = describe_failure(exc)
            if err.status >= 500 and err.code == "internal_error":
                log_unexpected(log, exc, "live translation", update.segment)
            await out.error(err.code, err.message, segment=update.segment,
                            final=update.final, lang=self.lang)
            return False
        if outcome.result.finish_reason == "cancelled":
            if update.final:
                await out.error("cancelled", "the final was cancelled",
                                segment=update.segment, final=True, lang=self.lang)
                return False
            return True
        r = outcome.result
        now = time.perf_counter()
        queue_ms = (started - update.received) * 1000 + max(
            0.0, (now - started) * 1000 - r.decode_ms)
        if update.final:
            services.metrics.caption_seconds(now - update.received)
        if outcome.pause != "reused":  # a generation counts once, when it ran
            services.metrics.generation(r)
        services.metrics.verdict(outcome)
        text = outcome.text
        if commits is not None:
            step = self.commit_step(update, commits, r.tokens, text, outcome.pathology)
            if step is not None:
                text = step.text if step.final else text
                # before the caption: nothing of a segment is committed after its final
                await out.commit(Commit(update.segment, self.lang, step.text, step.delta,
                                        step.final))
        await out.caption({
            "type": "caption", "segment": update.segment, "lang": self.lang,
            "revision": self.next_revision(update), "source": update.text,
            "text": text,
            "display_text": self.display(update.segment,
                                         Translation(text, update.final,
                                                     r.tokens if outcome.shown_tokens is None
                                                     else outcome.shown_tokens)),
            "final": update.final,
            "stats": {
                **draft_stats(r),
                "forward_passes": r.forward_passes,
                "decode_ms": round(r.decode_ms, 2), "queue_wait_ms": round(queue_ms, 2),
                "coalesced": fan.queue.coalesced, "superseded": fan.superseded,
                "pathology": outcome.pathology, "draft_dropped": outcome.draft_dropped,
                "retried": outcome.retried,
                **({"pause": outcome.pause} if outcome.pause is not None else {}),
                **({"glossary": outcome.glossary} if outcome.glossary is not None else {}),
                "timings": measured.report(),
                **({"speech": update.speech} if update.speech is not None else {}),
            },
        })
        return False

    def segment_commits(self, segment: int) -> SegmentCommits:
        """The segment's committed text, made on its first update and dropped after its
        final (or, for a segment left without one, once ``MAX_POLICIES`` newer are open)."""
        commits = self.commits.get(segment)
        if commits is None:
            commits = SegmentCommits(self.token_bytes, display_unit(self.lang),
                                     self.options.mask_k)
            self.commits[segment] = commits
            while len(self.commits) > MAX_POLICIES:
                del self.commits[min(self.commits)]
        return commits

    def commit_step(self, update: Update, commits: SegmentCommits, tokens: list[int],
                    caption: str, pathology: str | None = None) -> CommitStep | None:
        """What this translated update commits: a partial, what has become stable (if
        anything; nothing from an output that is no translation); a final, the rest of the
        segment, whose text starts with everything committed (the committed prefix wins
        over a final that would diverge)."""
        if update.final:  # the segment closes: its commit state goes
            self.commits.pop(update.segment, None)
        return append_step(commits, tokens, caption, update.final, pathology)

    def next_revision(self, update: Update) -> int:
        """1, 2, ... per segment; a final closes its segment's count."""
        if update.final:
            return self.revisions.pop(update.segment, 0) + 1
        revision = self.revisions.get(update.segment, 0) + 1
        self.revisions[update.segment] = revision
        return revision

    def display(self, segment: int, out: Translation) -> str:
        """What viewers see of this output: the segment's display policy, made on its first
        caption and forgotten after its final."""
        policy = self.policies.get(segment)
        if policy is None:
            # mask-k counts tokens as the translator's display-only mask does
            detokenize = self.detokenize if self.display_mode == "mask-k" else None
            policy = display_policy(self.display_mode, self.options.mask_k,
                                    unit=display_unit(self.lang), detokenize=detokenize)
            self.policies[segment] = policy
        shown = policy.show(out)
        if out.final:
            self.policies.pop(segment, None)
        return shown

    def forget_policies(self, segment: int) -> None:
        """A partial of ``segment`` is being translated: earlier segments' partial displays
        are over (their finals, if still to come, show the final whole anyway)."""
        for stale in [s for s in self.policies if s < segment]:
            del self.policies[stale]
        while len(self.policies) > MAX_POLICIES:  # out-of-order segment numbers
            del self.policies[min(self.policies)]


class FanOut:
    def __init__(self, services: LiveServices, publisher: CaptionPublisher,
                 pipelines: list[LanguagePipeline]) -> None:
        self.services = services
        self.publisher = publisher
        self.pipelines = pipelines  # in the client's order of languages
        self.queue = SegmentQueue()
        self.stopping = False
        # the partial's jobs handed to the engine queue (its update, shared cancel, one
        # started event per language), while they wait there or run
        self.inflight: tuple[Update, threading.Event, list[threading.Event]] | None = None
        self.superseding = asyncio.Event()  # a newer update made the queued one stale
        self.superseded = 0
        # queue positions (one per language) of a partial that was superseded while waiting:
        # its replacement takes the same places instead of going to the back of the queue
        self.partial_seqs: dict[str, int] | None = None
        # the update being translated and its job per language; left set when ``run`` is
        # cancelled mid-way, so that ``abandon`` answers the languages it left unanswered
        self.running: tuple[Update, dict[str, asyncio.Task]] | None = None

    def stop(self) -> None:
        """No more updates: translate what is queued, then end."""
        self.stopping = True
        self.queue.changed.set()

    def submit(self, update: Update) -> None:
        """Queue an update; a queued partial it makes stale is dropped before it costs a
        forward pass, and a running partial stops when a final arrives, unless it is that
        final's translation at a pause (same segment and words): the final takes it."""
        self.queue.put(update)
        if self.inflight is None:
            return
        partial, cancel, started = self.inflight
        if update.final and partial.pause and (partial.segment, partial.text) == (
                update.segment, update.text):
            return
        if not any(s.is_set() for s in started):
            # so that a final behind it is not held up until the partial's turn in the queue
            cancel.set()
            self.superseding.set()
        elif update.final or update.pause:
            # a running partial is stale once the final (or the words heard at a pause,
            # translated as the final will be) is here: it stops at its next forward pass
            # (no caption, no draft) instead of making the final wait for it
            cancel.set()

    async def run(self) -> None:
        """Translate queued updates one at a time until ``stop`` and an empty queue."""
        while True:
            update = self.queue.take()
            if update is None:
                if self.stopping:
                    return  # the reader refuses late frames, then sends 'done'
                self.queue.changed.clear()
                await self.queue.changed.wait()
                continue
            try:
                await self.fan_out(update)
            except ConnectionGone:
                raise
            except Exception as exc:  # noqa: BLE001 - one update's bug, not the connection's
                reraise_lost_cancel()
                self.running = None  # answered here, never again by ``abandon``
                log_unexpected(log, exc, "live translator", update.segment)
                await self.publisher.error("internal_error", "Internal server error.",
                                           segment=update.segment, final=update.final)

    async def fan_out(self, update: Update) -> None:
        """One update into every language at once; each pipeline sends its caption (or its
        error) as soon as it is done, and the next update starts when all are. A partial
        superseded while every language still waits in the queue is dropped as a whole;
        once one runs, the others run too (only a final, or a pause's partial, cancels running
        partials)."""
        pipelines = self.pipelines
        # another segment than the sessions' current one starts with an empty draft, even
        # if no final closed the last one
        for p in pipelines:
            p.session.enter_segment(update.segment)
            if not update.final:
                p.forget_policies(update.segment)
        started = time.perf_counter()
        cancel = threading.Event()
        begun = {p.lang: threading.Event() for p in pipelines}
        seqs: dict[str, int | None] = dict.fromkeys(begun)
        if not update.final:
            self.inflight = (update, cancel, list(begun.values()))
            if self.partial_seqs is None:
                self.partial_seqs = {lang: self.services.next_seq() for lang in begun}
            seqs.update(self.partial_seqs)
        self.superseding.clear()
        jobs = [asyncio.create_task(p.caption(update, self, started, cancel, begun[p.lang],
                                                seqs[p.lang]))
                for p in pipelines]
        self.running = (update, {p.lang: job for p, job in zip(pipelines, jobs, strict=True)})
        everything = asyncio.gather(*jobs, return_exceptions=True)
        try:
            if not update.final:
                stale = asyncio.create_task(self.superseding.wait())
                try:
                    await asyncio.wait({everything, stale},
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    # also when this task is cancelled (the client left): a task left
                    # pending on the event is destroyed with the connection, and asyncio
                    # logs "Task was destroyed but it is pending!" at ERROR
                    stale.cancel()
                if not everything.done() and not any(b.is_set() for b in begun.values()):
                    for job in jobs:
                        job.cancel()  # the engine skips them when their turn comes
                    await asyncio.wait(jobs)
                    self.superseded += 1  # a newer update replaced it while it waited
                    self.running = None
                    return
            results = await everything
        except asyncio.CancelledError:
            for job in jobs:  # asyncio.wait leaves them running: no caption after this
                job.cancel()
            raise
        finally:
            self.inflight = None
            if update.final or any(b.is_set() for b in begun.values()):
                self.partial_seqs = None  # it ran: the next partial queues anew
        self.running = None
        if not update.final and any(r is True for r in results):
            self.superseded += 1  # stopped by a final while running
        for p, result in zip(pipelines, results, strict=True):
            if isinstance(result, ConnectionGone):
                raise result
            if isinstance(result, BaseException):
                log_unexpected(log, result, "live translator", update.segment)
                await self.publisher.error("internal_error", "Internal server error.",
                                           segment=update.segment, final=update.final,
                                           lang=p.lang)

    async def abandon(self, code: str, message: str) -> None:
        """Answer every final that ``run`` left unanswered, once it was cancelled (the
        shutdown's grace is over) or died: the running final in each language that has no
        caption yet, then each queued final, each by an error frame naming its segment.

        Whatever ends a connection answers its accepted finals first (API.md): a final
        the client sent is never met with silence and a close.
        """
        running, self.running = self.running, None
        if running is not None:
            update, jobs = running
            for job in jobs.values():
                job.cancel()  # (already, when ``run`` was cancelled)
            await asyncio.gather(*jobs.values(), return_exceptions=True)
            for lang, job in jobs.items():
                if update.final and (job.cancelled() or job.exception() is not None):
                    await self.publisher.error(code, message, segment=update.segment,
                                               final=True, lang=lang)
        for update in self.queue.clear():
            await self.publisher.error(code, message, segment=update.segment, final=True)
