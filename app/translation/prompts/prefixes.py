"""The tokens every prompt of a translation direction starts with.

A served direction's prompts share their preamble (the few-shot examples, or a chat
template's system turn) up to the source. Computed once at start and held in the KV
cache (``app.engine.engine.Engine.hold_prefixes``), the first update of every direction
decodes only its own part instead of the whole preamble.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import permutations

from app.prefix import common_prefix
from app.translation.prompts.formats import PromptFormat
from app.translation.prompts.parts import Tokenize, tokenize_prompt

# two sources that share no first character: the prompts' common prefix ends before them
_PROBES = ("a", "z")


def served_directions(langs: Iterable[str], known: Iterable[str]) -> list[tuple[str, str]]:
    """Every ordered pair of ``langs`` the prompt format has examples for, in order."""
    names = set(known)
    served = [lang for lang in dict.fromkeys(langs) if lang in names]
    return list(permutations(served, 2))


def direction_prefix(fmt: PromptFormat, source_lang: str, target_lang: str,
                     tokenize: Tokenize) -> list[int]:
    """The tokens every prompt from ``source_lang`` to ``target_lang`` starts with."""
    first, second = (tokenize_prompt(fmt.translation(probe, source_lang, target_lang),
                                     tokenize) for probe in _PROBES)
    return first[: common_prefix(first, second)]
