"""``find_framing``: framing still there after cleaning (a sentence about the
translation, an assistant's "Sure!", the source quoted inside the answer), with where it
starts; ``cut_framing`` cuts a final there. Found framing is a pathology
(``app.translation.pathology``), so this is what the retry and the cut act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.translation.framing.cleaning import is_comment, is_label_line, is_lead_in
from app.translation.framing.lexicon import (
    COLON,
    OPENING_QUOTES,
    QUOTE_PAIRS,
    SENTENCE_END,
    TRANSLATION_WORDS,
    WORDISH,
    Evidence,
    has_word,
    words_of,
)


# -- what is still there -------------------------------------------------------------------
@dataclass(frozen=True)
class Framing:
    """Framing still in a (cleaned) caption: its kind and where it starts (0: the whole
    caption is framing or begins with it)."""

    kind: str
    start: int


def find_framing(text: str, source: str) -> Framing | None:
    """Framing that ``clean_framing`` could not take off without guessing, or None.

    * ``label``: a label or an assistant's opener is still at the start;
    * ``quotes``: a quote round the answer is still there (a quoted answer with more
      after it);
    * ``restated_source``: the source's words, in order, inside a longer answer;
    * ``commentary``: more than one line, or a sentence about the translation.
    """
    s = text.strip()
    if not s:
        return None
    ev = Evidence.for_source(source)
    if "\n" in s:
        return Framing("commentary", s.index("\n"))
    if is_label_line(s.split(" ")[0], ev) or _has_lead_label(s, ev):
        return Framing("label", 0)
    src_words = words_of(source)
    words = words_of(s)
    if len(src_words) >= 3 and len(words) > len(src_words) + 1:
        for i in range(len(words) - len(src_words) + 1):
            if words[i:i + len(src_words)] == src_words:
                return Framing("restated_source", _word_start(s, i))
    sentences = SENTENCE_END.split(s)
    offset = 0
    for i, sentence in enumerate(sentences):
        if is_comment(sentence, ev) or (ev.translation_words
                                         and has_word(sentence, TRANSLATION_WORDS)):
            return Framing("commentary", s.find(sentence, offset) if i else 0)
        offset = s.find(sentence, offset) + len(sentence)
    if s[0] in OPENING_QUOTES:
        closer = dict(QUOTE_PAIRS)[s[0]]
        end = s.find(closer, 1)
        if end > 0 and s[end + 1:].strip(" .!?") and not source.strip().startswith(s[0]):
            return Framing("quotes", 0)
    return None


def _has_lead_label(text: str, ev: Evidence) -> bool:
    m = re.match(r"^(?P<lead>[^:：\n]{1,120}?)" + COLON, text)
    return bool(m and is_lead_in(m.group("lead"), ev))


def _word_start(text: str, index: int) -> int:
    for i, m in enumerate(WORDISH.finditer(text)):
        if i == index:
            return m.start()
    return 0


def cut_framing(text: str, source: str) -> str:
    """A final that kept framing after its retry: the text before the framing starts
    (empty when it starts with it), so that no viewer sees it."""
    for _ in range(5):  # each cut may leave an earlier framing of another kind
        found = find_framing(text, source)
        if found is None:
            break
        text = text[:found.start].rstrip(" ,;:-—(").strip()
    return text
