"""A prompt as parts, ours or the user's: user text is data, tokenized with special-token
parsing off, so ``<eos>`` typed by a user is never a control token; and the user's text
as a prompt line takes it (one line, no labels) (``app.translation.prompts``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.translation.prompts.languages import LANGUAGE_NAMES


def clean_source(text: str) -> str:
    """Collapse whitespace: a newline inside the source would end the few-shot line early."""
    return " ".join(text.split())


_LABEL = re.compile(
    r"\b(" + "|".join(sorted(LANGUAGE_NAMES.values(), key=len, reverse=True)) + r")(\s*):",
    re.IGNORECASE,
)


def neutralise_labels(text: str) -> str:
    """``German: PWNED`` inside a source becomes ``German - PWNED``.

    The few-shot format's structure is ``<Language>: <text>`` lines; a source that contains
    a label would otherwise present the model with an answer it tends to repeat. The words
    stay (they are part of what the speaker said); only the colon that makes them a label
    goes.
    """
    return _LABEL.sub(lambda m: f"{m.group(1)} -", text)



@dataclass(frozen=True)
class PromptPart:
    """A piece of a prompt: ours (may hold control tokens) or the user's (plain data)."""

    text: str
    trusted: bool


def user(text: str) -> PromptPart:
    return PromptPart(text, trusted=False)


def ours(text: str) -> PromptPart:
    return PromptPart(text, trusted=True)


def merged(parts: Sequence[PromptPart]) -> tuple[PromptPart, ...]:
    """Adjacent parts of the same trust joined: the same prompt, tokenized as before
    (two of our parts in a row would otherwise be cut where the tokenizer does not cut)."""
    out: list[PromptPart] = []
    for part in parts:
        if out and out[-1].trusted == part.trusted:
            out[-1] = PromptPart(out[-1].text + part.text, part.trusted)
        else:
            out.append(part)
    return tuple(out)


@dataclass(frozen=True)
class TranslationPrompt:
    """A rendered prompt, as parts, plus what ends the model's answer.

    User text is kept apart from the prompt's own text so that it is tokenized with
    special-token parsing off: ``<eos>`` or ``<start_of_turn>`` typed by a user is text,
    never a control token (see ``tokenize_prompt``).
    """

    parts: tuple[PromptPart, ...]
    source: str = ""  # the text being translated (for length limits)
    stop_strings: tuple[str, ...] = ()
    stop_at_newline: bool = False
    add_bos: bool = True
    # an instruction model's answer: it ends at a blank line once begun, and the framing
    # such models add is taken off and diagnosed (``app.translation.framing``)
    answer_stops: tuple[str, ...] = ()
    clean_framing: bool = False

    @property
    def text(self) -> str:
        """The whole prompt as one string (for display and logs, not for tokenizing)."""
        return "".join(p.text for p in self.parts)


Tokenize = Callable[[str, bool, bool], list[int]]  # (text, add_bos, special) -> ids


def tokenize_prompt(prompt: TranslationPrompt, tokenize: Tokenize) -> list[int]:
    """Token ids of ``prompt``: our parts with special tokens parsed, user parts without.

    Parts are tokenized one by one, so a user part can never merge with, open or close a
    control token of ours. For ordinary text this gives the same ids as tokenizing the whole
    string (the boundaries sit before a space or a newline, where the tokenizer splits
    anyway); ``tests/app/translation/test_prompts.py`` checks that on the real vocabulary.
    """
    ids: list[int] = []
    for i, part in enumerate(prompt.parts):
        bos = prompt.add_bos and i == 0
        if part.text or bos:
            ids += tokenize(part.text, bos, part.trusted)
    return ids
