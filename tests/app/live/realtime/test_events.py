"""Every server event validates as the official SDK's own type (``openai.types.realtime``),
and the session it carries as ``RealtimeTranslationSession``."""

from __future__ import annotations

from openai.types.realtime import (
    RealtimeErrorEvent,
    RealtimeTranslationInputTranscriptDeltaEvent,
    RealtimeTranslationOutputAudioDeltaEvent,
    RealtimeTranslationOutputTranscriptDeltaEvent,
    RealtimeTranslationSessionClosedEvent,
    RealtimeTranslationSessionCreatedEvent,
    RealtimeTranslationSessionUpdatedEvent,
)

from app.live.frames import encode_frame
from app.live.realtime import events
from app.live.realtime.session_state import SessionConfig


def test_server_events_are_the_sdks_types() -> None:
    session = SessionConfig(model="livetrans", output_language="de",
                            transcription_model="whisper").to_json()
    created = RealtimeTranslationSessionCreatedEvent.model_validate(
        events.session_event("session.created", session))
    assert created.session.audio.output.language == "de"
    assert created.session.audio.input.transcription.model == "whisper"
    RealtimeTranslationSessionUpdatedEvent.model_validate(
        events.session_event("session.updated", session))
    RealtimeTranslationSessionClosedEvent.model_validate(events.closed_event())
    RealtimeTranslationInputTranscriptDeltaEvent.model_validate(
        events.transcript_delta("session.input_transcript.delta", "Hello", 200))
    RealtimeTranslationOutputTranscriptDeltaEvent.model_validate(
        events.transcript_delta("session.output_transcript.delta", " Hallo", 400))
    audio = RealtimeTranslationOutputAudioDeltaEvent.model_validate(
        events.audio_delta("AAAA", 24000, 600))
    assert (audio.format, audio.sample_rate, audio.channels) == ("pcm16", 24000, 1)
    error = RealtimeErrorEvent.model_validate(events.error_event(
        "invalid_audio", "not base64", param="audio", client_event_id="ev-1"))
    assert (error.error.type, error.error.code, error.error.param,
            error.error.event_id) == ("invalid_request_error", "invalid_audio", "audio",
                                      "ev-1")


def test_event_ids_are_unique_and_hostile_ids_still_encode() -> None:
    ids = {events.event_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(i.startswith("event_") for i in ids)
    event = events.error_event("unknown_event", "x", client_event_id="\ud800\n" + "y" * 500)
    assert len(event["error"]["event_id"]) < 100
    encode_frame(event).encode("utf-8")  # a text frame always encodes
