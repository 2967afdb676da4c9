"""Assembles drafter chains for requests from what is loaded (see ``drafters/``).

"previous" in a request's ``drafters`` list means two things: the SSBD draft (the previous
translation, verified in the first forward pass) and, after a mismatch, re-alignment
proposals from that previous translation. The other drafters propose tokens past it.
Dictionaries and trigram tables are per target language and load lazily from ``dict_dir``
(``<lang>.dict``, ``<lang>.trigram``); a language without one simply goes without.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from app.settings import Settings

log = logging.getLogger("livetrans.drafting")


class ChainBuilder:
    """Builds a ``DrafterChain`` per request from the requested names, in the given order."""

    def __init__(self, dict_dir: Path | None, tokenizer: Any) -> None:
        self.dict_dir = dict_dir
        self.tokenizer = tokenizer
        self._per_lang: dict[tuple[str, str], Any] = {}

    @classmethod
    def from_settings(cls, settings: Settings, runtime: Any) -> ChainBuilder:
        return cls(settings.dict_dir, runtime)

    def describe(self) -> str:
        return f"previous, ngram; dictionaries from {self.dict_dir or '(none)'}"

    def _load(self, kind: str, lang: str) -> Any:
        key = (kind, lang)
        if key in self._per_lang:
            return self._per_lang[key]
        drafter = None
        if self.dict_dir is not None:
            path = self.dict_dir / f"{lang}.{kind}"
            if path.exists():
                try:
                    if kind == "dict":
                        from drafters.dictionary import DictionaryDrafter

                        drafter = DictionaryDrafter.load(path)
                    else:
                        from drafters.trigram import TrigramDrafter

                        drafter = TrigramDrafter.load(path)
                except Exception:  # noqa: BLE001 - a broken file costs speed, not service
                    log.exception("could not load %s", path)
        self._per_lang[key] = drafter
        return drafter

    def build(self, names: list[str], target_lang: str) -> Any:
        try:
            from drafters.chain import DrafterChain
            from drafters.ngram import PromptNgramDrafter
            from drafters.previous import PreviousOutputDrafter
        except ImportError:
            return None
        parts = []
        for name in names:
            if name == "previous":
                parts.append(PreviousOutputDrafter())
            elif name == "ngram":
                parts.append(PromptNgramDrafter())
            elif name == "dictionary":
                d = self._load("dict", target_lang)
                if d is not None:
                    parts.append(d)
            elif name == "trigram":
                t = self._load("trigram", target_lang)
                if t is not None:
                    parts.append(t)
        return DrafterChain(parts) if parts else None
