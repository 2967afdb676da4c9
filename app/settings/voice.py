"""Speech output: the voices that speak committed translations."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from app.settings.base import CommaList, SubsystemSettings, lowercase, registered_name


class VoiceSettings(SubsystemSettings):
    """Speech output."""

    group: ClassVar[str] = "voice options"
    flat_prefix: ClassVar[str] = "voice_"
    flat_names: ClassVar[dict[str, str]] = {"voices": "voices"}

    voices: CommaList = Field(
        default_factory=list, description="LANG=PATH.onnx: a Piper voice (its .onnx.json "
        "beside it) that speaks LANG's committed text to connections asking for it (start's "
        "voices); languages without one get the default engine's voice (--voice-engine)")
    engine: str = Field(
        "auto", description="the voice of languages no --voice names: auto (the packaged "
        "voices installed: Kokoro for ja, Piper's joe for en), piper, kokoro, espeak-ng, "
        "none, or a voice engine registered by name (app.voice.engines); espeak-ng speaks "
        "every language the others do not (except with none)")
    threads: int = Field(
        1, ge=1, le=64, description="CPU threads speech synthesis may use, every voice "
                                    "together (the rest stays with translation)")

    @field_validator("engine", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return lowercase(value)

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        """One of the voice registry's choices (``auto``, every engine, ``none``)."""
        from app.voice.engines import choices

        return registered_name(value, choices())

    @field_validator("voices")
    @classmethod
    def _voices(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        entries, langs = [], set()
        for entry in value:
            lang, sep, path = entry.partition("=")
            if not sep or not path.strip().endswith(".onnx"):
                raise ValueError(f"'{entry}' is not LANG=PATH.onnx (e.g. "
                                 "de=voices/de_DE-thorsten-medium.onnx)")
            try:
                lang = check_language(lang, "voices")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
            if lang in langs:
                raise ValueError(f"'{lang}' has two voices; name one voice per language")
            langs.add(lang)
            entries.append(f"{lang}={path.strip()}")
        return entries
