"""The protocol's server events, shaped as the official SDK parses them
(``openai.types.realtime.realtime_translation_*``, ``RealtimeErrorEvent``).

Every event gets a fresh ``event_id``; an error names the client event it answers
(``error.event_id``) when the client gave one. Client text repeated in a message goes
through ``safe_echo`` (no control characters, no lone surrogates, bounded), so an error
event always encodes.
"""

from __future__ import annotations

import secrets
from typing import Any

from app.live.frames import safe_echo

FRAME_MS = 200  # the protocol's engine frame: ``elapsed_ms`` advances in these steps


def event_id() -> str:
    """A server event's id, ``event_`` and 22 random characters, as OpenAI's look."""
    return "event_" + secrets.token_urlsafe(16)


def error_event(code: str, message: str, *, param: str | None = None,
                client_event_id: str | None = None,
                kind: str = "invalid_request_error") -> dict[str, Any]:
    """An ``error`` event (``RealtimeErrorEvent``): ``kind`` is OpenAI's error ``type``
    (``invalid_request_error`` for the client's mistakes, ``server_error`` for ours)."""
    error: dict[str, Any] = {"type": kind, "code": code, "message": message,
                             "param": param,
                             "event_id": safe_echo(client_event_id)
                             if client_event_id is not None else None}
    return {"type": "error", "event_id": event_id(), "error": error}


def session_event(kind: str, session: dict[str, Any]) -> dict[str, Any]:
    """``session.created`` or ``session.updated`` with the whole session."""
    return {"type": kind, "event_id": event_id(), "session": session}


def closed_event() -> dict[str, Any]:
    return {"type": "session.closed", "event_id": event_id()}


def transcript_delta(kind: str, delta: str, elapsed_ms: int) -> dict[str, Any]:
    """``session.input_transcript.delta`` or ``session.output_transcript.delta``."""
    return {"type": kind, "event_id": event_id(), "delta": delta, "elapsed_ms": elapsed_ms}


def audio_delta(pcm_b64: str, sample_rate: int, elapsed_ms: int) -> dict[str, Any]:
    """``session.output_audio.delta``: base64 PCM16 mono and how to play it."""
    return {"type": "session.output_audio.delta", "event_id": event_id(), "delta": pcm_b64,
            "format": "pcm16", "sample_rate": sample_rate, "channels": 1,
            "elapsed_ms": elapsed_ms}
