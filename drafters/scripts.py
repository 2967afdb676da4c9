"""Which writing systems put spaces between words, for code that looks for word edges.

Thai, Lao, Myanmar and Khmer, Japanese kana and Han characters are written without spaces
between words, and Korean attaches particles to the noun ("기계번역은"): a term there has no
word boundary, and a translation does not put a space before it. Glossary matching
(``app.translation.glossary``) and the glossary drafters (``drafters.glossary``) ask here.
"""

from __future__ import annotations

import re

# dense scripts: a character carries about a syllable or a morpheme (Han, kana, Hangul)
_DENSE = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
          "\uac00-\ud7af\uf900-\ufaff")
UNSPACED_RANGES = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff" + _DENSE
# a letter or digit of a script that separates words by spaces
SPACED_WORD_CHAR = f"[^\\W{UNSPACED_RANGES}]"
_SPACED = re.compile(SPACED_WORD_CHAR)
_DENSE_CHAR = re.compile(f"[{_DENSE}]")


def spaced_word_char(char: str) -> bool:
    """``char`` is a letter or digit of a script that puts spaces between words."""
    return bool(_SPACED.match(char))


def unspaced(char: str) -> bool:
    """``char`` belongs to a script written without spaces between words."""
    return bool(char) and bool(re.match(f"[{UNSPACED_RANGES}]", char))


def dense(char: str) -> bool:
    """``char`` is Han, kana or Hangul: one character is already a strong cue."""
    return bool(_DENSE_CHAR.match(char))
