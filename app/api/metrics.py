"""Prometheus metrics: one registry per server, so tests can start several servers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from app.translation.backend import GenerationResult
from app.voice.stream import VoiceMetrics

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("livetrans_requests_total", "HTTP requests",
                                ["route", "status"], registry=r)
        self.queue_depth = Gauge("livetrans_queue_depth", "engine jobs waiting", registry=r)
        self.active_sessions = Gauge("livetrans_active_sessions", "sessions held", registry=r)
        self.tokens = Counter("livetrans_tokens_generated_total", "output tokens",
                              ["route"], registry=r)
        self.drafted = Counter("livetrans_draft_tokens_total", "tokens proposed to the verifier",
                               ["drafter"], registry=r)
        self.accepted = Counter("livetrans_accepted_tokens_total", "proposed tokens accepted",
                                ["drafter"], registry=r)
        self.forward_passes = Counter("livetrans_forward_passes_total", "llama_decode calls",
                                      registry=r)
        self.decode_seconds = Histogram("livetrans_decode_seconds", "engine time per request",
                                        ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.e2e_seconds = Histogram("livetrans_request_seconds", "end-to-end HTTP latency",
                                     ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.pathological = Counter(
            "livetrans_pathological_outputs_total",
            "translations app.translation.pathology diagnosed",
            ["kind", "final"], registry=r)
        self.drafts_dropped = Counter(
            "livetrans_drafts_dropped_total", "outputs refused as the next update's draft",
            ["reason"], registry=r)
        self.finals_retried = Counter(
            "livetrans_finals_retried_total", "pathological finals translated again",
            ["kind"], registry=r)
        self.step_rows = Histogram(
            "livetrans_step_batch_rows", "batch rows per forward pass",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=r)
        self.step_sequences = Histogram(
            "livetrans_step_sequences", "sequences per forward pass",
            buckets=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64), registry=r)
        self.slot_occupancy = Gauge(
            "livetrans_slot_occupancy", "share of the context's sequences running", registry=r)
        self.queue_wait = Histogram(
            "livetrans_queue_wait_seconds", "wait for a sequence, by priority",
            ["priority"], buckets=_LATENCY_BUCKETS, registry=r)
        self.admission_refusals = Counter(
            "livetrans_admission_refusals_total", "work refused at once (busy), by reason",
            ["reason"], registry=r)
        self.preemptions = Counter(
            "livetrans_preemptions_total", "running sequences that gave way to more urgent "
            "ones", registry=r)
        self.caption_seconds = Histogram(
            "livetrans_final_caption_seconds", "time from a final's arrival to its caption",
            buckets=_LATENCY_BUCKETS, registry=r)
        # rooms (app/rooms/registry.py): viewers cost no engine time, only sockets and queues
        self.live_viewers = Gauge(
            "livetrans_live_viewers", "viewer connections of rooms (/v1/live/watch)",
            registry=r)
        self.viewer_frames_dropped = Counter(
            "livetrans_viewer_frames_dropped_total", "partial caption frames dropped for "
            "viewers that could not keep up (finals are never dropped)", registry=r)
        # the room bus (app/rooms/bus): shared rooms across replicas, and transcripts
        self.bus_up = Gauge("livetrans_room_bus_up", "1 while the room bus answers, else 0",
                            registry=r)
        self.bus_errors = Counter(
            "livetrans_room_bus_errors_total", "room bus operations that failed (frames "
            "other replicas' viewers missed; finals are kept and sent again)", registry=r)
        self.bus_pending_finals = Gauge(
            "livetrans_room_bus_pending_finals", "finals and transcript lines waiting for "
            "the room bus or the transcript store to come back", registry=r)
        self.task_restarts = Counter(
            "livetrans_task_restarts_total", "background tasks (and the scheduler thread) "
            "restarted after an unexpected exception, by task", ["task"], registry=r)
        self.bus_skipped_messages = Counter(
            "livetrans_room_bus_skipped_messages_total", "messages on the room bus that were "
            "not ours to read (foreign or malformed) and were skipped", registry=r)
        self.transcript_lines = Counter(
            "livetrans_transcript_lines_total", "final captions written to transcripts",
            registry=r)

        self.glossary_terms = Counter(
            "livetrans_glossary_terms_total", "glossary entries that applied to a final: "
            "its target term held in the translation, or missed", ["outcome"], registry=r)
        # speech in (app/live/audio.py): the recogniser's share of the machine
        self.asr_seconds = Histogram(
            "livetrans_asr_decode_seconds", "compute time of one speech recognition call",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.asr_audio_seconds = Counter(
            "livetrans_asr_audio_seconds_total", "seconds of speech audio recognised",
            registry=r)
        self.asr_dropped_seconds = Counter(
            "livetrans_asr_dropped_audio_seconds_total", "seconds of audio dropped because "
            "a speaker's backlog was full (audio_overrun) or a WHIP publisher's queue was",
            registry=r)

        # pushes (app/live/outputs): YouTube captions and webhooks, per final caption
        self.output_finals = Counter(
            "livetrans_output_finals_total", "final captions pushed to outputs, by output "
            "type and outcome (delivered, failed after retries or refused, dropped from a "
            "full queue)", ["type", "outcome"], registry=r)
        self.output_retries = Counter(
            "livetrans_output_retries_total", "push requests sent again after a network "
            "error, a timeout or a retryable status", ["type"], registry=r)
        self.output_pending = Gauge(
            "livetrans_output_pending", "final captions queued or under way to outputs",
            registry=r)
        self.output_seconds = Histogram(
            "livetrans_output_delivery_seconds", "time from a final caption to its push's "
            "delivery", ["type"], buckets=_LATENCY_BUCKETS, registry=r)

        # voices (app/voice): what was spoken, what it cost, what was lost
        self.voice_audio_seconds = Counter(
            "livetrans_voice_audio_seconds_total", "seconds of translated speech spoken, "
            "by language and engine", ["lang", "engine"], registry=r)
        self.voice_synthesis_seconds = Counter(
            "livetrans_voice_synthesis_seconds_total", "seconds spent synthesizing that "
            "speech, by engine (divided by the audio's seconds: the real-time factor)",
            ["engine"], registry=r)
        self.voice_delay_seconds = Histogram(
            "livetrans_voice_delay_seconds", "time from a phrase's commit to the start of "
            "its speech, played in real time behind what was spoken before it",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.voice_lost_phrases = Counter(
            "livetrans_voice_lost_phrases_total", "committed phrases not spoken, by reason "
            "(overrun, failed, closed)", ["reason"], registry=r)

        # room voice listeners over WebRTC (app/live/listen): who listens, what they missed
        self.voice_listeners = Gauge(
            "livetrans_voice_listeners", "WebRTC listeners of room voices on this replica, "
            "by language", ["lang"], registry=r)
        self.voice_listener_skipped_seconds = Counter(
            "livetrans_voice_listener_skipped_seconds_total", "seconds a listener did not "
            "hear to stay near the live edge: pauses skipped after a burst, or speech dropped "
            "beyond the listener's queue", ["kind"], registry=r)

    def voice_metrics(self) -> VoiceMetrics:
        """The callbacks every voice stream reports to."""
        def spoken(lang: str, engine: str, audio_s: float, synth_s: float,
                   delay_s: float) -> None:
            self.voice_audio_seconds.labels(lang, engine).inc(audio_s)
            self.voice_synthesis_seconds.labels(engine).inc(synth_s)
            self.voice_delay_seconds.observe(max(0.0, delay_s))

        return VoiceMetrics(spoken=spoken,
                            lost=lambda reason, n: self.voice_lost_phrases.labels(reason).inc(n))

    def observe_output(self, kind: str, event: str, seconds: float = 0.0) -> None:
        """One push event (``app.live.outputs.delivery``): queued, delivered, failed,
        dropped (each queued final ends in one of the three), or one more try."""
        if event == "queued":
            self.output_pending.inc()
        elif event == "retries":
            self.output_retries.labels(kind).inc()
        elif event in ("delivered", "failed", "dropped"):
            self.output_pending.dec()
            self.output_finals.labels(kind, event).inc()
            if event == "delivered":
                self.output_seconds.labels(kind).observe(seconds)

    def observe_asr(self, compute_s: float, audio_s: float) -> None:
        self.asr_seconds.observe(compute_s)
        self.asr_audio_seconds.inc(audio_s)

    def observe_generation(self, result: GenerationResult, route: str) -> None:
        self.tokens.labels(route).inc(len(result.tokens))
        self.forward_passes.inc(result.forward_passes)
        self.decode_seconds.labels(route).observe(result.decode_ms / 1000)
        for name, proposed in result.drafts.proposed.items():
            self.drafted.labels(name).inc(proposed)
            self.accepted.labels(name).inc(result.drafts.accepted.get(name, 0))

    def observe_step(self, report, running: int, slots: int) -> None:  # noqa: ANN001
        """One forward pass of the step scheduler (``app.engine.engine.StepReport``)."""
        self.step_rows.observe(report.rows)
        self.step_sequences.observe(report.sequences)
        self.slot_occupancy.set(running / slots if slots else 0.0)

    def observe_admission(self, priority: str, waited_s: float, preempted: bool) -> None:
        self.queue_wait.labels(priority).observe(waited_s)
        if preempted:
            self.preemptions.inc()

    def observe_verdict(self, outcome) -> None:  # noqa: ANN001 - translator.TranslationOutcome
        """Count what ``app.translation.pathology`` found in one translated update, and its final's
        glossary terms."""
        report = outcome.glossary
        if report is not None and outcome.is_final:
            missed = len(report["missed"])
            self.glossary_terms.labels("held").inc(report["applied"] - missed)
            self.glossary_terms.labels("missed").inc(missed)
        if outcome.pathology:
            self.pathological.labels(outcome.pathology, str(outcome.is_final).lower()).inc()
        if outcome.draft_dropped and not outcome.is_final:
            self.drafts_dropped.labels(outcome.draft_dropped).inc()
        if outcome.retried:
            self.finals_retried.labels(outcome.retried).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
