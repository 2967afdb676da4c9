"""Glossary files for ``livetrans eval --glossary``: term lists per target language and talk.

    {"de": {"*": {"corpus": "Korpus"},
            "2022.acl-long.268": {"language model": "Sprachmodell"}}}

A stream of talk T into language L uses the entries of ``L`` / ``"*"`` and ``L`` / ``T``
(the talk's own win on the same source term). Entries are checked as the server checks a
request's ``glossary`` (``app.translation.glossary.check_glossary``); a bad file is one line naming
it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.translation.glossary import GlossaryError, check_glossary
from app.usage import UsageError, require_file


@dataclass(frozen=True)
class GlossaryFile:
    by_lang: dict[str, dict[str, dict[str, str]]]

    def for_stream(self, lang: str, talk: str | None) -> dict[str, str] | None:
        """The glossary of a stream of ``talk`` into ``lang`` (None: the file has none)."""
        lists = self.by_lang.get(lang)
        if not lists:
            return None
        merged = {**lists.get("*", {}), **(lists.get(talk, {}) if talk else {})}
        return merged or None


def load_glossaries(path: Path) -> GlossaryFile:
    where = f"--glossary {path}"
    require_file(path, "--glossary")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where}: not a JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: expected {{LANG: {{TALK_ID or '*': {{term: term}}}}}}")
    out: dict[str, dict[str, dict[str, str]]] = {}
    for lang, talks in data.items():
        if not isinstance(talks, dict):
            raise UsageError(f"{where}: '{lang}' must map talk ids (or '*') to glossaries")
        out[lang] = {}
        for talk, glossary in talks.items():
            try:
                out[lang][talk] = check_glossary(glossary)
            except GlossaryError as exc:
                raise UsageError(f"{where}: {lang} / {talk}: {exc}") from None
    return GlossaryFile(out)
