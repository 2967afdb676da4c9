"""The words framing is made of, in every language the prompts support: language names,
"translation" and its family, assistants' openers, the starts of notes and comments, the
quotes that wrap an answer; and ``Evidence``, what a source itself says (a word it uses is
no evidence of framing). The lexicon is data, kept apart from the rules that read it
(``app.translation.framing``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- the lexicon -------------------------------------------------------------------------
# Names of the languages, in English and in each language (nouns and the adverbial forms a
# label uses: "auf Deutsch", "en allemand"). Lower case; compared case-insensitively.
LANGUAGE_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("english", "englisch", "anglais", "inglés", "ingles", "inglese", "inglês",
           "англійською", "англійська", "английский", "английском", "英语", "英文", "英語"),
    "de": ("german", "deutsch", "deutsche", "deutschen", "allemand", "alemán", "aleman",
           "tedesco", "alemão", "німецькою", "німецька", "немецкий", "немецком", "德语",
           "德文", "ドイツ語"),
    "fr": ("french", "französisch", "französische", "français", "francais", "francés",
           "francese", "francês", "французькою", "французька", "французский",
           "французском", "法语", "法文", "フランス語"),
    "es": ("spanish", "spanisch", "espagnol", "español", "espanol", "spagnolo", "espanhol",
           "іспанською", "іспанська", "испанский", "испанском", "西班牙语", "スペイン語"),
    "it": ("italian", "italienisch", "italien", "italiano", "італійською", "італійська",
           "итальянский", "итальянском", "意大利语", "イタリア語"),
    "pt": ("portuguese", "portugiesisch", "portugais", "portugués", "portoghese",
           "português", "португальською", "португальська", "португальский",
           "португальском", "葡萄牙语", "ポルトガル語"),
    "uk": ("ukrainian", "ukrainisch", "ukrainien", "ucraniano", "ucraino", "українською",
           "українська", "украинский", "украинском", "乌克兰语", "ウクライナ語"),
    "ru": ("russian", "russisch", "russe", "ruso", "russo", "російською", "російська",
           "русский", "русском", "по-русски", "俄语", "ロシア語"),
    "zh": ("chinese", "chinesisch", "chinois", "chino", "cinese", "chinês", "китайською",
           "китайська", "китайский", "китайском", "中文", "汉语", "中国語"),
    "ja": ("japanese", "japanisch", "japonais", "japonés", "giapponese", "japonês",
           "японською", "японська", "японский", "японском", "日语", "日文", "日本語"),
}
_ALL_LANGUAGE_WORDS = tuple(w for words in LANGUAGE_WORDS.values() for w in words)

# "translation" and its family, in every supported language.
TRANSLATION_WORDS: tuple[str, ...] = (
    "translation", "translated", "translate", "translates", "translating",
    "übersetzung", "übersetzt", "übersetzen", "übersetze",
    "traduction", "traduit", "traduite", "traduire",
    "traducción", "traducido", "traducida", "traducir",
    "traduzione", "tradotto", "tradotta", "tradurre",
    "tradução", "traduzido", "traduzida", "traduzir",
    "переклад", "перекладі", "перекладом", "перевод", "переводе", "переводом",
    "翻译", "译文", "翻訳", "訳",
)

# How an assistant opens an answer, in every supported language (lower case).
OPENERS: tuple[str, ...] = (
    "here is", "here's", "here are", "sure", "certainly", "of course", "okay", "ok,",
    "the translation", "translation", "this translates", "this means", "in ",
    "hier ist", "hier sind", "hier die", "gerne", "gern", "natürlich", "klar", "die übersetzung",
    "übersetzung", "auf deutsch",
    "voici", "voilà", "bien sûr", "la traduction", "traduction", "en ",
    "aquí está", "aquí tienes", "aquí tiene", "claro", "por supuesto", "la traducción",
    "traducción",
    "ecco", "certo", "la traduzione", "traduzione",
    "aqui está", "aqui estão", "a tradução", "tradução",
    "ось", "звісно", "переклад", "вот", "конечно", "перевод",
    "以下是", "这是", "翻译", "好的", "以下は", "翻訳",
)

# What a note or a comment after the translation begins with.
COMMENT_STARTS: tuple[str, ...] = (
    "note", "please note", "n.b.", "nb:", "this translation", "this is a", "this sentence",
    "the translation", "the sentence", "the phrase", "the word", "literally", "i hope",
    "i have", "i've", "i translated", "let me know", "if you", "alternatively", "or:",
    "hinweis", "anmerkung", "beachten sie", "wörtlich", "die übersetzung",
    "remarque", "littéralement", "la traduction",
    "nota", "literalmente", "la traducción", "letteralmente", "la traduzione",
    "a tradução",
    "примітка", "примечание", "дослівно", "дословно",
    "注", "注意", "注：", "字面",
)

QUOTE_PAIRS: tuple[tuple[str, str], ...] = (
    ('"', '"'), ("“", "”"), ("„", "“"), ("„", "”"), ("«", "»"), ("»", "«"), ("‘", "’"),
    ("‚", "‘"), ("'", "'"), ("「", "」"), ("『", "』"), ("《", "》"),
)
OPENING_QUOTES = frozenset(q for q, _ in QUOTE_PAIRS)
_CLOSING_QUOTES = frozenset(q for _, q in QUOTE_PAIRS)
ALL_QUOTES = "".join(sorted(OPENING_QUOTES | _CLOSING_QUOTES))

COLON = r"[:：]"
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
WORDISH = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
# a leading separator a restated source is followed by
SEPARATOR = re.compile(r"^\s*(?:=|->|→|=>|—|–|-|:|：)\s*")


def words_of(text: str) -> list[str]:
    return [w.casefold() for w in WORDISH.findall(text)]


def has_word(text: str, words: tuple[str, ...]) -> bool:
    """``text`` holds one of ``words`` as a word (or, for CJK, anywhere)."""
    folded = text.casefold()
    tokens = set(words_of(text))
    for w in words:
        if any("\u3040" <= ch <= "\u9fff" for ch in w):
            if w in folded:
                return True
        elif " " in w or "-" in w:
            if w in folded:
                return True
        elif w in tokens:
            return True
    return False


@dataclass(frozen=True)
class Evidence:
    """Which kinds of framing words count for a source: words the source itself uses
    ("translation" in a talk about machine translation, a language's name) are no sign
    that the model is talking about its answer."""

    translation_words: bool
    language_words: bool
    source_colon: bool = False  # a colon in the source: one in the answer is the speaker's
    # the source has words a note begins with ("Note that ...", "literally", "I hope"):
    # a sentence of the answer that begins so may be their translation
    comment_words: bool = True

    @classmethod
    def for_source(cls, source: str) -> Evidence:
        src = source.casefold()
        return cls(translation_words=not ("translat" in src or has_word(source,
                                                                         TRANSLATION_WORDS)),
                   language_words=not (has_word(source, _ALL_LANGUAGE_WORDS)
                                       or "language" in src),
                   source_colon=":" in source or "：" in source,
                   comment_words=not re.search(
                       r"(?i)\b(note|notes|n\.b|literally|hope|let me know|alternatively|"
                       r"if you|this translation|i have|i've)\b", source))

    def framing_words(self, text: str) -> bool:
        """``text`` names the translation or a language where the source does not."""
        return (self.translation_words and has_word(text, TRANSLATION_WORDS)) or \
            (self.language_words and has_word(text, _ALL_LANGUAGE_WORDS))
