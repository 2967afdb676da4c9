"""Which writing systems a language's text uses, and which of them a token's text belongs to.

A vocabulary token is "of a language" when every character of it is either a letter (or
combining mark) of one of that language's scripts, or a neutral character: the word-start
marker ``▁``, digits, ASCII and Latin-1 punctuation and symbols, general punctuation
(dashes, quotes), currency signs, and, for Chinese and Japanese, the CJK symbol and
full-width forms blocks. Letters are classed by the first word of their Unicode name
(``LATIN``, ``CYRILLIC``, ``CJK``, ``HIRAGANA``, ``KATAKANA``), which is exact for every
letter those languages write and needs no table of code-point ranges.
"""

from __future__ import annotations

import functools
import unicodedata

WORD_START = "\u2581"  # SentencePiece's marker for a preceding space

LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    "en": frozenset({"LATIN"}),
    "de": frozenset({"LATIN"}),
    "fr": frozenset({"LATIN"}),
    "es": frozenset({"LATIN"}),
    "it": frozenset({"LATIN"}),
    "pt": frozenset({"LATIN"}),
    "uk": frozenset({"CYRILLIC"}),
    "ru": frozenset({"CYRILLIC"}),
    "zh": frozenset({"CJK"}),
    "ja": frozenset({"CJK", "HIRAGANA", "KATAKANA"}),
}
# Chinese and Japanese text uses these punctuation blocks; Latin and Cyrillic text does not.
CJK_PUNCTUATION = "CJK_PUNCTUATION"
_CJK_LANGS = frozenset({"zh", "ja"})


def scripts_of(langs: list[str]) -> frozenset[str]:
    """The scripts (and the CJK punctuation pseudo-script) that ``langs`` write in."""
    found: set[str] = set()
    for lang in langs:
        found |= LANGUAGE_SCRIPTS[lang]
        if lang in _CJK_LANGS:
            found.add(CJK_PUNCTUATION)
    return frozenset(found)


@functools.lru_cache(maxsize=65536)
def char_class(ch: str) -> str:
    """``LATIN``, ``CJK``, ...: a letter's script; ``NEUTRAL`` for digits, spaces and
    common punctuation; ``CJK_PUNCTUATION``; ``OTHER`` for every other symbol (emoji,
    arrows, box drawing), which only byte fallback needs to spell."""
    if ch == WORD_START:
        return "NEUTRAL"
    category = unicodedata.category(ch)
    code = ord(ch)
    if category[0] in "LM":
        try:
            return unicodedata.name(ch).split()[0]
        except ValueError:
            return "OTHER"
    if category[0] == "N" and code < 0x2070:
        return "NEUTRAL"
    if code < 0x0250 or 0x2000 <= code < 0x20D0:  # ASCII, Latin-1, punctuation, currency
        return "NEUTRAL"
    if 0x3000 <= code < 0x3040 or 0xFF00 <= code < 0xFFF0:
        return CJK_PUNCTUATION
    return "OTHER"


def token_fits(text: str, scripts: frozenset[str]) -> bool:
    """Every character of ``text`` is neutral or of one of ``scripts`` (an empty or
    all-neutral token fits any language)."""
    return all((cls := char_class(ch)) == "NEUTRAL" or cls in scripts for ch in text)
