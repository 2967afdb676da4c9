"""The event's languages: the ones served, and the vocabulary-trimmed copy of the model
made for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator

from app.settings.base import CommaList, SubsystemSettings


class LanguageSettings(SubsystemSettings):
    """The event's languages."""

    group: ClassVar[str] = "language options"

    langs: CommaList = Field(
        default_factory=list, description="the event's languages, e.g. en,de: only these "
        "are served (others are refused: language_not_served), and a model whose vocabulary "
        "can be trimmed is served as a copy trimmed to them, built on first start (about "
        "half a minute) and cached, which is faster on a CPU. Default: "
        "every language, the full model")
    no_trim: bool = Field(False, description="with --langs: serve the full model, untrimmed")
    corpus: CommaList = Field(
        default_factory=list, description="LANG=FILE: the organiser's text in one of --langs "
        "(a segment per line: slides, abstracts, earlier talks), counted for the trimmed "
        "copy besides the built-in word lists")

    @field_validator("langs")
    @classmethod
    def _langs(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        langs: list[str] = []
        for code in value:
            try:
                lang = check_language(code, "langs")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
            if lang in langs:
                raise ValueError(f"'{lang}' is named twice; name each language once")
            langs.append(lang)
        if len(langs) == 1:
            raise ValueError(f"only '{langs[0]}' is named; name the speakers' language and "
                             "the captions' (e.g. en,de)")
        return langs

    @field_validator("corpus")
    @classmethod
    def _corpus(cls, value: list[str]) -> list[str]:
        from app.translation.prompts import UnsupportedLanguageError, check_language

        entries = []
        for entry in value:
            lang, sep, path = entry.partition("=")
            if not sep or not path.strip():
                raise ValueError(f"'{entry}' is not LANG=FILE (e.g. de=talks/de.txt)")
            try:
                entries.append(f"{check_language(lang, 'corpus')}={path.strip()}")
            except UnsupportedLanguageError as exc:
                raise ValueError(str(exc)) from None
        return entries

    def corpus_files(self) -> list[tuple[str, Path]]:
        """``--corpus`` as (language, file) pairs."""
        return [(lang, Path(path).expanduser())
                for lang, _, path in (e.partition("=") for e in self.corpus)]
