"""Assembles a drafter chain per request from the drafters loaded for its target language.

"previous" in a request's ``drafters`` list means two things: the SSBD draft (the previous
translation, verified in the first forward pass) and, after a mismatch, re-alignment
proposals from that previous translation. The other drafters propose tokens past it.
Dictionaries and trigram tables are per target language and load lazily from ``dict_dir``
(``<lang>.dict``, ``<lang>.trigram.npz``); a language without them simply goes without.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from drafters.chain import DrafterChain, build_chain
from drafters.ngram import PromptNgramDrafter
from drafters.previous import PreviousOutputDrafter

log = logging.getLogger("livetrans.drafting")


class ChainBuilder:
    def __init__(self, dict_dir: Path | None, tokenizer_identity: str | None = None,
                 budget: int = 6, vocab_size: int | None = None) -> None:
        self.dict_dir = dict_dir
        self.tokenizer_identity = tokenizer_identity
        self.vocab_size = vocab_size
        self.budget = budget
        self._tables: dict[tuple[str, str], Any] = {}

    @classmethod
    def from_settings(cls, settings: Any, runtime: Any) -> ChainBuilder:
        identity = runtime.tok.identity() if settings.dict_dir else None
        return cls(settings.dict_dir, identity, vocab_size=runtime.tok.n_vocab)

    def describe(self) -> str:
        where = self.dict_dir or "(no --dict-dir)"
        return f"previous, ngram; dictionary/trigram tables from {where}"

    def _table(self, kind: str, lang: str) -> Any:
        key = (kind, lang)
        if key not in self._tables:
            self._tables[key] = self._load(kind, lang)
        return self._tables[key]

    def _load(self, kind: str, lang: str) -> Any:
        if self.dict_dir is None:
            return None
        try:
            if kind == "dictionary":
                path = self.dict_dir / f"{lang}.dict"
                if path.exists():
                    from drafters.dictionary import DictionaryDrafter

                    return DictionaryDrafter.load(path, self.tokenizer_identity)
            else:
                path = self.dict_dir / f"{lang}.trigram.npz"
                if path.exists():
                    from drafters.trigram import TrigramDrafter

                    return TrigramDrafter.load(path, self.tokenizer_identity, self.vocab_size)
        except ValueError as exc:  # built for another tokenizer (e.g. a trimmed model's)
            log.warning("the %s table for %s is not used: %s (rebuild it against this model)",
                        kind, lang, exc)
        except Exception:  # noqa: BLE001 - a broken table costs speed, not service
            log.exception("could not load the %s table for %s", kind, lang)
        return None

    def build(self, names: list[str], target_lang: str) -> DrafterChain | None:
        available: dict[str, Any] = {"previous": PreviousOutputDrafter(),
                                     "ngram": PromptNgramDrafter()}
        for kind in ("dictionary", "trigram"):
            if kind in names:
                table = self._table(kind, target_lang)
                if table is not None:
                    available[kind] = table
        return build_chain(names, available, budget=self.budget)
