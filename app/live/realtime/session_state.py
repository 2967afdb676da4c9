"""A translation session's configuration: what ``session.created`` / ``session.updated``
show, and the rules of ``session.update``.

The model and the session's type are fixed at creation (an update may repeat them, never
change them). An update applies whole or not at all: a bad language refuses the update
with one error event and leaves the session as it was.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.live.frames import safe_echo
from app.live.realtime.client_events import ClientEventError, SessionFields
from app.translation.prompts import LANGUAGE_NAMES, UnsupportedLanguageError, check_language

SESSION_TTL_S = 2 * 3600  # a session's ``expires_at``: OpenAI's sessions end too

# (language code, param) -> the normalised code, or ClientEventError
LanguageCheck = Callable[[str, str], str]


def language_checker(unserved: Callable[[dict[str, str]], tuple[str, str] | None],
                     ) -> LanguageCheck:
    """The check of a language a client names: one the translator knows and this server
    serves (``serve --langs``), normalised; else ``ClientEventError``."""
    def check(code: str, param: str) -> str:
        try:
            lang = check_language(code, param)
        except UnsupportedLanguageError:
            raise ClientEventError("unsupported_language", f"unsupported language "
                                   f"'{safe_echo(code, 16)}'; supported: "
                                   f"{', '.join(sorted(LANGUAGE_NAMES))}", param) from None
        refused = unserved({param: lang})
        if refused:
            raise ClientEventError("language_not_served", refused[1], param)
        return lang

    return check


def session_id() -> str:
    return "sess_" + secrets.token_hex(12)


@dataclass(frozen=True)
class SessionConfig:
    model: str
    id: str = dataclasses.field(default_factory=session_id)
    expires_at: int = dataclasses.field(
        default_factory=lambda: int(time.time()) + SESSION_TTL_S)
    output_language: str | None = None
    transcription_model: str | None = None  # None: no input transcript deltas
    noise_reduction: dict[str, Any] | None = None  # echoed; the recogniser has its own VAD
    source_language: str | None = None  # livetrans's own; None: Whisper detects it

    def to_json(self) -> dict[str, Any]:
        """The session as the SDK's ``RealtimeTranslationSession`` reads it."""
        audio_in: dict[str, Any] = {
            "transcription": ({"model": self.transcription_model}
                              if self.transcription_model is not None else None),
            "noise_reduction": self.noise_reduction,
        }
        return {"id": self.id, "type": "translation", "model": self.model,
                "expires_at": self.expires_at,
                "audio": {"input": audio_in, "output": {"language": self.output_language}},
                "livetrans": {"source_language": self.source_language}}

    def updated(self, fields: SessionFields, raw: dict[str, Any], check: LanguageCheck,
                event_id: str | None = None) -> SessionConfig:
        """This configuration with ``fields`` applied (``raw``: the client's object, where
        ``null`` turns an option off), or ``ClientEventError``."""
        if fields.model is not None and fields.model != self.model:
            raise ClientEventError("cannot_update_model", "the session's model is set when "
                                   "it is created and cannot change", "session.model",
                                   event_id)
        changes: dict[str, Any] = {}
        audio = raw.get("audio") if isinstance(raw.get("audio"), dict) else {}
        raw_in = audio.get("input") if isinstance(audio.get("input"), dict) else {}
        if fields.audio is not None and fields.audio.output is not None \
                and fields.audio.output.language is not None:
            changes["output_language"] = check(fields.audio.output.language,
                                               "session.audio.output.language")
        if fields.audio is not None and fields.audio.input is not None:
            inp = fields.audio.input
            if "transcription" in raw_in:
                changes["transcription_model"] = (inp.transcription.model
                                                  if inp.transcription else None)
            if "noise_reduction" in raw_in:
                changes["noise_reduction"] = (inp.noise_reduction.model_dump()
                                              if inp.noise_reduction else None)
        if fields.livetrans is not None and "source_language" in (raw.get("livetrans") or {}):
            source = fields.livetrans.source_language
            changes["source_language"] = (check(source, "session.livetrans.source_language")
                                          if source is not None else None)
        return dataclasses.replace(self, **changes)
