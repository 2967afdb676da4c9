"""The client's events, validated at the edge before they become state.

Three events exist (``session.update``, ``session.input_audio_buffer.append``,
``session.close``); anything else, malformed JSON, a field OpenAI does not define or a
value of the wrong kind becomes one ``ClientEventError`` (an ``error`` event; the session
goes on). Size is checked before parsing, so a 10 MB append costs one length check, not
a JSON tree and a base64 decode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.live.frames import safe_echo

# One append of this many characters is refused whole: 1 MiB of base64 is about 16 s of
# 24 kHz PCM16, far above the 200 ms a client is asked to send.
MAX_EVENT_CHARS = 1 << 20
MAX_NAME_CHARS = 64
EVENT_TYPES = ("session.update", "session.input_audio_buffer.append", "session.close")


class ClientEventError(ValueError):
    """A client event the server will not act on; becomes one ``error`` event."""

    def __init__(self, code: str, message: str, param: str | None = None,
                 event_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.event_id = event_id


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class NoiseReduction(_Strict):
    type: Literal["near_field", "far_field"]
    strength: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)


class Transcription(_Strict):
    model: str = Field(min_length=1, max_length=MAX_NAME_CHARS)


class InputFormat(_Strict):
    """Only what the WebSocket transport takes: 24 kHz PCM16 (anything else is refused)."""

    type: Literal["audio/pcm"] = "audio/pcm"
    rate: Literal[24000] = 24000


class AudioInput(_Strict):
    transcription: Transcription | None = None
    noise_reduction: NoiseReduction | None = None
    format: InputFormat | None = None


class AudioOutput(_Strict):
    language: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)


class Audio(_Strict):
    input: AudioInput | None = None
    output: AudioOutput | None = None


class LivetransOptions(_Strict):
    """livetrans's own, optional: the speaker's language when Whisper should not guess."""

    source_language: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)


class SessionFields(_Strict):
    """What ``session.update`` (and a client secret's ``session``) may carry. ``type`` and
    ``model`` are allowed only as they already are (the model cannot change)."""

    type: Literal["translation"] | None = None
    model: str | None = Field(None, max_length=MAX_NAME_CHARS)
    audio: Audio | None = None
    livetrans: LivetransOptions | None = None


@dataclass(frozen=True)
class Update:
    session: SessionFields
    fields_set: dict[str, Any]  # the raw object, to tell "null" from "absent"
    event_id: str | None


@dataclass(frozen=True)
class Append:
    audio: str  # base64, decoded by the audio buffer
    event_id: str | None


@dataclass(frozen=True)
class Close:
    event_id: str | None


ClientEvent = Update | Append | Close


def _event_id(value: Any) -> str | None:
    if isinstance(value, dict):
        eid = value.get("event_id")
        if isinstance(eid, str):
            return eid[:MAX_NAME_CHARS]
    return None


def _field_error(exc: ValidationError, prefix: str, eid: str | None) -> ClientEventError:
    err = exc.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    param = f"{prefix}.{loc}" if loc else prefix
    if err.get("type") == "extra_forbidden":
        return ClientEventError("unknown_parameter", f"Unknown parameter: "
                                f"'{safe_echo(param)}'.", safe_echo(param), eid)
    if loc.endswith("format.rate") or loc.endswith("format.type"):
        return ClientEventError("unsupported_audio_format", "the WebSocket transport takes "
                                "24 kHz PCM16 mono only (audio/pcm, rate 24000)",
                                safe_echo(param), eid)
    text = safe_echo(str(err.get("msg", "")), 200)
    return ClientEventError("invalid_value", f"Invalid value for '{safe_echo(param)}': "
                            f"{text}", safe_echo(param), eid)


def parse_session_fields(value: Any, prefix: str = "session",
                         eid: str | None = None) -> SessionFields:
    """A ``session`` object of an update or a client secret, or ``ClientEventError``."""
    if not isinstance(value, dict):
        raise ClientEventError("invalid_value", f"'{prefix}' must be an object", prefix, eid)
    try:
        return SessionFields.model_validate(value)
    except ValidationError as exc:
        raise _field_error(exc, prefix, eid) from None


def parse_client_event(raw: str) -> ClientEvent:
    """One text frame as a client event, or ``ClientEventError``."""
    if len(raw) > MAX_EVENT_CHARS:
        raise ClientEventError("event_too_large", f"event of {len(raw)} characters; the "
                               f"limit is {MAX_EVENT_CHARS} (append 200 ms of audio at a "
                               "time)")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ClientEventError("invalid_json", "the event is not valid JSON") from None
    if not isinstance(value, dict):
        raise ClientEventError("invalid_event", "an event is a JSON object with a 'type'")
    eid = _event_id(value)
    kind = value.get("type")
    if not isinstance(kind, str):
        raise ClientEventError("invalid_event", "the event has no string 'type'", "type", eid)
    if kind not in EVENT_TYPES:
        raise ClientEventError("unknown_event", f"Unknown event type "
                               f"'{safe_echo(kind)}'; this session takes "
                               f"{', '.join(EVENT_TYPES)}", "type", eid)
    extra = sorted(set(value) - {"type", "event_id", "session", "audio"})
    if extra or (kind != "session.update" and "session" in value) or (
            kind != "session.input_audio_buffer.append" and "audio" in value):
        name = extra[0] if extra else ("session" if "session" in value else "audio")
        raise ClientEventError("unknown_parameter", f"Unknown parameter: "
                               f"'{safe_echo(name)}'.", safe_echo(name), eid)
    if kind == "session.update":
        return Update(parse_session_fields(value.get("session"), "session", eid),
                      value.get("session") or {}, eid)
    if kind == "session.input_audio_buffer.append":
        audio = value.get("audio")
        if not isinstance(audio, str):
            raise ClientEventError("invalid_value", "'audio' must be a base64 string of "
                                   "24 kHz PCM16 mono", "audio", eid)
        return Append(audio, eid)
    return Close(eid)
