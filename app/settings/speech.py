"""Speech input: which recogniser (``--asr-engine``), its model, where and on how many
threads it runs.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from app.settings.base import SubsystemSettings, lowercase, registered_name


class SpeechSettings(SubsystemSettings):
    """Speech input."""

    group: ClassVar[str] = "speech options"
    flat_prefix: ClassVar[str] = "asr_"
    flat_names: ClassVar[dict[str, str]] = {"max_speakers": "max_audio_speakers",
                                            "no_pause_translation": "no_pause_translation"}

    engine: str = Field(
        "whisper", description="the speech recogniser, by name (app.speech.engines): whisper "
                               "(faster-whisper) is the one built in")
    model: str | None = Field(
        None, description="CTranslate2 Whisper folder for speech input on /v1/live (model.bin, "
                          "config.json, ...); default: the bundled Whisper base")
    threads: int = Field(
        1, ge=1, description="CPU threads speech recognition may use, every audio speaker "
                             "together (the rest stays with translation)")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where Whisper runs: cuda when a GPU is there (auto), or cpu")
    window: Literal["fit", "full"] = Field(
        "fit", description="Whisper's encoder window: fitted to the buffer (fit: about a "
                           "quarter of the compute for short buffers) or faster-whisper's "
                           "30 s (full)")
    max_speakers: int = Field(
        1, ge=1, description="audio speakers recognised at once (one recogniser thread for "
                             "all); one more gets a busy error frame at start")

    no_pause_translation: bool = Field(
        False, description="translate a partial heard at a pause in the speech as an "
        "ordinary partial (by default it is translated as its final will be, so a final "
        "with the same words is captioned at once; docs/audio-in.md); for comparison")

    @field_validator("engine", "device", "window", mode="before")
    @classmethod
    def _lowercase(cls, value: Any) -> Any:
        return lowercase(value)

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        """One of the registry's names; refused as a ``Literal`` is, with the choices."""
        from app.speech.engines import ENGINES

        return registered_name(value, sorted(ENGINES))
