"""Partials: ``held_back`` holds back the tail of a partial that could still grow into a
label or an assistant's opener, so no viewer sees framing flicker in; ``StreamCleaner``
does the same for a streamed answer, delta by delta (``app.translation.framing``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from app.translation.framing.cleaning import clean_framing
from app.translation.framing.lexicon import (
    ALL_QUOTES,
    COMMENT_STARTS,
    LANGUAGE_WORDS,
    OPENERS,
    SENTENCE_END,
    Evidence,
    words_of,
)


# -- partials ------------------------------------------------------------------------------
@functools.cache
def _opener_phrases(target_lang: str) -> tuple[str, ...]:
    """Phrases a label or an assistant's answer begins with, for ``held_back``."""
    names = list(LANGUAGE_WORDS.get(target_lang, ()))
    english = names[0] if names else ""
    out = list(OPENERS)
    for lang in {english, *names[:3]} - {""}:
        out += [f"in {lang}, the translation is", f"in {lang}:", f"{lang}:",
                f"{lang} translation:", f"the {lang} translation is",
                f"here is the {lang} translation:", f"here's the {lang} translation:",
                f"translation to {lang}:", f"translation into {lang}:",
                f"translated into {lang}:", f"auf {lang}:", f"en {lang} :",
                f"traduction en {lang} :", f"traducción al {lang}:"]
    out += ["hier ist die übersetzung:", "übersetzung ins deutsche:", "übersetzung auf deutsch:",
            "voici la traduction :", "aquí está la traducción:",
            "ecco la traduzione:", "aqui está a tradução:", "вот перевод:", "ось переклад:",
            "以下是翻译：", "以下は翻訳です："]
    return tuple(dict.fromkeys(p.casefold() for p in out))


def held_back(text: str, source: str, target_lang: str) -> str:
    """What a partial may show: ``text`` (already cleaned) less a tail that could still
    grow into framing: the whole text while it is the beginning of a label or an opener
    ("Here", "Hier ist die", "In German, the"), or its last sentence when that is ("Guten
    Morgen. Note"); a lone opening quote or label word is not shown either.

    A source that itself opens that way ("Here is the plan") is translated with the same
    opener, so the source's first words in the target language are not held back by an
    English opener: only phrases the source does not begin with count.
    """
    s = text.strip()
    if not s:
        return ""
    phrases = _opener_phrases(target_lang)
    if len(SENTENCE_END.split(s)) > 1:  # after a sentence: a note or a comment may begin
        phrases += tuple(p for p in COMMENT_STARTS if len(p) > 2)
    src = " ".join(words_of(source))
    sentences = SENTENCE_END.split(s)
    tail = sentences[-1]
    head = s[: len(s) - len(tail)].strip()
    said = " ".join(words_of(tail))
    if said and src.startswith(said):  # the source's own words: "Here is" for "Here is"
        return s
    if _could_grow_into(tail, phrases, Evidence.for_source(source)):
        return head
    return s


def _could_grow_into(fragment: str, phrases: tuple[str, ...], ev: Evidence) -> bool:
    """The fragment is the beginning of a label or an opener, or an unfinished lead-in
    that names the translation or a language ("Here is the translation", "Die
    Übersetzung ins"): a colon may still come."""
    f = fragment.strip().lstrip(ALL_QUOTES + " ").casefold()
    if not f:
        return bool(fragment.strip())  # nothing but quotes
    if any(p.startswith(f) for p in phrases):
        return True
    return len(f) <= 80 and ev.framing_words(f) and not re.search(r"[.!?。！？]", f)


class StreamCleaner:
    """A streamed answer's deltas, cleaned as a partial is: what goes out is always the
    start of the cleaned, held-back text, and never taken back (a client appends deltas),
    so text that cleaning could still change waits."""

    def __init__(self, emit: Callable[[str], None], source: str, target_lang: str) -> None:
        self.emit = emit
        self.source = source
        self.target_lang = target_lang
        self.raw = ""
        self.sent = ""

    def feed(self, delta: str) -> None:
        self.raw += delta
        text = held_back(clean_framing(self.raw, self.source).text, self.source,
                         self.target_lang)
        # a closing quote or a note may still come off the end: keep the last word back
        stable = text[: len(text) - len(text.split(" ")[-1])] if " " in text else ""
        if stable.startswith(self.sent) and len(stable) > len(self.sent):
            self.emit(stable[len(self.sent):])
            self.sent = stable

    def finish(self, text: str) -> None:
        """The end of the answer: the rest of its final (cleaned) text goes out."""
        text = text.strip()
        if text.startswith(self.sent) and len(text) > len(self.sent):
            self.emit(text[len(self.sent):])
            self.sent = text
