"""Words of a corpus line, per script, for extracting word n-grams.

* Space-delimited scripts (de, uk, fr, ...): runs of letters/digits with inner hyphens and
  apostrophes; punctuation is left out (it is its own token anyway).
* Chinese: ``jieba`` (a maintained, dictionary-based segmenter with no model download;
  words like 研究人员 are exactly the multi-token units a dictionary should complete).
* Japanese: maximal runs of one script (kanji, katakana, hiragana, latin/digits). This
  needs no dictionary package (MeCab/UniDic add ~50 MB): kanji compounds and katakana
  loanwords, the long multi-token words, come out whole; hiragana runs group particles
  with inflections, which n-grams of order 2-3 then stitch to their stems.

``leading`` tells what precedes a word in running text: a space for spaced scripts, nothing
for zh/ja. In spaced scripts, the model writes a word after a space as a "▁word" piece, so
n-grams are tokenized with a leading space.
"""

from __future__ import annotations

import re

SPACELESS = {"zh", "ja"}
_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)
_JA_RUNS = re.compile(
    r"[\u4e00-\u9fff\u3400-\u4dbf々〆ヵヶ]+|[\u30a0-\u30ffー]+|[\u3040-\u309f]+|[A-Za-z0-9]+"
)


def leading(lang: str) -> str:
    """What precedes an n-gram in running text: a space, or nothing for zh/ja."""
    return "" if lang in SPACELESS else " "


def words(line: str, lang: str) -> list[str]:
    if lang == "zh":
        import jieba

        jieba.setLogLevel(60)
        return [w for w in jieba.lcut(line) if _WORD.fullmatch(w)]
    if lang == "ja":
        return _JA_RUNS.findall(line)
    return _WORD.findall(line)
