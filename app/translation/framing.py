"""What an instruction model wraps round a translation, recognised and taken off.

Asked for "the translation only", instruction-tuned models still add framing often enough
that a live caption must never show it: a label ("Translation:", "In German, the
translation is:", "Hier ist die Übersetzung:", "Voici la traduction :"), wrapping quotes
(" " “ ” „ “ « » 「 」), a note in parentheses, a second paragraph of commentary, or the
source restated before its translation. A base model's few-shot answer has none of this
(its line ends at the newline), so only chat-template prompts are cleaned
(``TranslationPrompt.clean_framing``).

Two steps, both pure functions of text:

* ``clean_framing``: what can be taken off without guessing is taken off: the text after
  a blank line or an echoed label, a leading label, wrapping quotes, a restated source
  before a separator, trailing notes and commentary sentences. The kinds it removed are
  reported (``Cleaned.removed``); the caption is the rest.
* ``find_framing``: framing that is still there (a sentence about the translation, an
  assistant's "Sure!", the source quoted inside the answer) with where it starts. That is
  a pathology (``app.translation.pathology.FRAMING_KINDS``): retried, never a draft, never
  context, and a final that keeps it after the retry is cut where it starts.

Partials get ``held_back`` on top: a partial whose text (or its last sentence) could
still grow into a label or an assistant's opener ("Here", "Hier ist die", "In German, the")
is held back until it cannot, so that no viewer sees framing flicker in.

The words are built for the class, not for examples: openers, label words and language
names in every language the prompts support (``app.translation.prompts.LANGUAGE_NAMES``),
in English and in the target language. Words that the source itself uses ("translation"
in a talk about machine translation, a language's name) are no evidence of framing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
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

_QUOTE_PAIRS: tuple[tuple[str, str], ...] = (
    ('"', '"'), ("“", "”"), ("„", "“"), ("„", "”"), ("«", "»"), ("»", "«"), ("‘", "’"),
    ("‚", "‘"), ("'", "'"), ("「", "」"), ("『", "』"), ("《", "》"),
)
_OPENING_QUOTES = frozenset(q for q, _ in _QUOTE_PAIRS)
_CLOSING_QUOTES = frozenset(q for _, q in _QUOTE_PAIRS)
_ALL_QUOTES = "".join(sorted(_OPENING_QUOTES | _CLOSING_QUOTES))

_COLON = r"[:：]"
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
_WORDISH = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
# a leading separator a restated source is followed by
_SEPARATOR = re.compile(r"^\s*(?:=|->|→|=>|—|–|-|:|：)\s*")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORDISH.findall(text)]


def _has_word(text: str, words: tuple[str, ...]) -> bool:
    """``text`` holds one of ``words`` as a word (or, for CJK, anywhere)."""
    folded = text.casefold()
    tokens = set(_words(text))
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
        return cls(translation_words=not ("translat" in src or _has_word(source,
                                                                         TRANSLATION_WORDS)),
                   language_words=not (_has_word(source, _ALL_LANGUAGE_WORDS)
                                       or "language" in src),
                   source_colon=":" in source or "：" in source,
                   comment_words=not re.search(
                       r"(?i)\b(note|notes|n\.b|literally|hope|let me know|alternatively|"
                       r"if you|this translation|i have|i've)\b", source))

    def framing_words(self, text: str) -> bool:
        """``text`` names the translation or a language where the source does not."""
        return (self.translation_words and _has_word(text, TRANSLATION_WORDS)) or \
            (self.language_words and _has_word(text, _ALL_LANGUAGE_WORDS))


# -- cleaning -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Cleaned:
    """A caption's text with the framing taken off, and the kinds that were taken off."""

    text: str
    removed: tuple[str, ...] = ()


def clean_framing(text: str, source: str) -> Cleaned:
    """``text`` without the framing that can be taken off without guessing.

    In order: everything after the end of the answer (a blank line once the answer has
    begun, a line that echoes a label, a second line of commentary); leading label lines
    and labels ("Translation:", "Hier ist die Übersetzung:"); a restated source before a
    separator ('"Good morning" = Guten Morgen'); wrapping quotes (not when the source is
    quoted the same way); trailing notes in parentheses and commentary sentences. What
    ``find_framing`` still finds afterwards is a pathology, not cleaned here.
    """
    ev = Evidence.for_source(source)
    removed: list[str] = []
    rest = _cut_paragraphs(text.strip(), ev, removed)
    for _ in range(3):  # a label inside quotes inside a label ...: a few rounds at most
        before = rest
        rest = _strip_label(rest, ev, removed)
        rest = _strip_restated(rest, source, removed)
        rest = _strip_quotes(rest, source, removed)
        if rest == before:
            break
    rest = _strip_trailing_comments(rest, ev, removed)
    rest = _strip_quotes(rest, source, removed)
    return Cleaned(rest.strip(), tuple(dict.fromkeys(removed)))


def _is_label_line(line: str, ev: Evidence) -> bool:
    """A line that introduces the answer rather than being it: it ends with a colon and
    names the translation or a language, or is an assistant's opener ("Sure!")."""
    s = line.strip()
    if not s:
        return False
    if re.search(_COLON + r"\s*$", s):
        return len(s) <= 120 and _is_lead_in(re.sub(_COLON + r"\s*$", "", s), ev)
    return len(s) <= 40 and bool(re.fullmatch(r"(?i)(sure|certainly|of course|okay|ok|gerne|"
                                              r"natürlich|bien sûr|claro|certo|конечно|"
                                              r"звісно|好的)[!.,]*", s))


def _cut_paragraphs(text: str, ev: Evidence, removed: list[str]) -> str:
    """The answer's first line of content, after any label lines: a caption is one line
    (its source is), so what follows is commentary or a second answer."""
    lines = text.split("\n")

    def introduces(line: str, more: bool) -> bool:
        # "Here is the German translation" with the answer on the next line
        return more and len(line.strip()) <= 80 and ev.framing_words(line) and \
            _starts_with(line.strip(), OPENERS)

    while lines and (not lines[0].strip() or _is_label_line(lines[0], ev)
                     or introduces(lines[0], any(ln.strip() for ln in lines[1:]))):
        if lines[0].strip():
            removed.append("label")
        lines.pop(0)
    if not lines:
        return ""
    if any(ln.strip() for ln in lines[1:]):
        removed.append("commentary")
    return lines[0].strip()


def answer_begun(before: str, source: str) -> bool:
    """Whether the text before a line break is an answer (the line break ends it) or only
    leads in to one ("Here is the translation:", "Here is the German translation",
    "Sure!"): the engine's answer stop asks this (``GenerationRequest.answer_begun``)."""
    ev = Evidence.for_source(source)
    lines = [ln for ln in before.split("\n") if ln.strip()]
    return any(not (_is_label_line(ln, ev) or (len(ln.strip()) <= 80 and ev.framing_words(ln)
                                               and _starts_with(ln.strip(), OPENERS)))
               for ln in lines)


def _starts_with(text: str, phrases: tuple[str, ...]) -> bool:
    folded = text.casefold().lstrip(_ALL_QUOTES + " ")
    return any(folded.startswith(p) for p in phrases)


def _strip_label(text: str, ev: Evidence, removed: list[str]) -> str:
    """A leading label: a lead-in up to a colon (or up to "is" before a quote) that names
    the translation or a language, or opens like an assistant ("Sure! Here it is:")."""
    m = re.match(r"^(?P<lead>[^:：\n]{1,120}?)" + _COLON + r"\s*(?P<rest>.+)$", text, re.S)
    if m and _is_lead_in(m.group("lead"), ev):
        removed.append("label")
        return m.group("rest").lstrip("*_ ").strip()
    # 'In German, "Good morning" is "Guten Morgen".' / 'The translation is "..."'
    m = re.match(r"^(?P<lead>.{1,160}?\s(?:is|would be|lautet|heißt|ist|est|es|è|é|будет|"
                 r"это|—|-))\s+(?P<rest>[" + re.escape("".join(_OPENING_QUOTES)) + r"].+)$",
                 text, re.S)
    if m and ev.framing_words(m.group("lead")):
        removed.append("label")
        return m.group("rest").strip()
    # "Sure! Guten Morgen." - an opener sentence before the answer
    m = re.match(r"^(?i:sure|certainly|of course|okay|gerne|natürlich|bien sûr|claro|certo|"
                 r"конечно|звісно)[!.,]\s+(?P<rest>.+)$", text, re.S)
    if m:
        removed.append("label")
        return m.group("rest").strip()
    return text


OPENER_LEADS = ("here is", "here's", "here you go", "here it is", "hier ist", "hier die",
                "voici", "aquí está", "aquí tienes", "ecco", "aqui está", "вот", "ось",
                "以下是", "以下は", "sure", "certainly", "of course", "gerne", "bien sûr")
_FILLERS = frozenset({"is", "it", "you", "go", "the", "your", "here", "here's", "sure",
                      "of", "course", "ist", "sie", "sind", "die", "bitte", "la", "le", "el",
                      "está", "tienes", "estão", "ça", "ecco", "gerne", "bien", "sûr", "ok",
                      "okay", "certainly"})


def _is_lead_in(lead: str, ev: Evidence) -> bool:
    """A text before a colon is a label when it names the translation or a language, or
    is an assistant's opener; a short one without either ("Wichtig:", "Erstens:") is part
    of the translation."""
    stripped = lead.strip(" *_#>")
    if not stripped:
        return False
    if ev.framing_words(stripped):
        return True
    # an opener alone ("Here it is:", "Sure, here you go:"), never "Hier ist ein Beispiel:"
    # (the translation of "Here is an example:"), nor where the source has a colon itself
    if ev.source_colon or not _starts_with(stripped, OPENER_LEADS):
        return False
    return all(w in _FILLERS for w in _words(stripped)[1:])


def _squash(text: str) -> str:
    return "".join(w for w in _words(text))


def _strip_restated(text: str, source: str, removed: list[str]) -> str:
    """A source restated before its translation: '"Good morning, everyone." = Guten
    Morgen zusammen.' or 'Good morning, everyone. -> Guten Morgen zusammen.'."""
    src_words = _words(source)
    if len(src_words) < 2:
        return text
    body = text.lstrip(_ALL_QUOTES + " ")
    words = _words(body)
    if len(words) <= len(src_words) or words[:len(src_words)] != src_words:
        return text
    # where the restated source ends in ``body``
    pos, seen = 0, 0
    for m in _WORDISH.finditer(body):
        seen += 1
        pos = m.end()
        if seen == len(src_words):
            break
    tail = body[pos:].lstrip(_ALL_QUOTES + ".,!? ")
    sep = _SEPARATOR.match(body[pos:].lstrip(_ALL_QUOTES + ".,!?"))
    if sep is None and not re.match(r"(?i)(means|is|heißt|bedeutet|signifie|significa)\b",
                                    tail):
        return text
    rest = body[pos:].lstrip(_ALL_QUOTES + ".,!?")
    rest = _SEPARATOR.sub("", rest, count=1) if sep else \
        re.sub(r"(?i)^\s*(means|is|heißt|bedeutet|signifie|significa)\b[^\w" +
               re.escape(_ALL_QUOTES) + r"]*", "", rest, count=1)
    if not rest.strip():
        return text
    removed.append("restated_source")
    return rest.strip()


def _quoted_like(source: str, opener: str, closer: str) -> bool:
    s = source.strip()
    return s.startswith(opener) and s.rstrip(".!?").endswith(closer)


def _strip_quotes(text: str, source: str, removed: list[str]) -> str:
    """Quotes round the whole answer (a closing one may come before the final
    punctuation: '"Guten Morgen".'), or an opening quote never closed (an answer cut off,
    or a partial), unless the source itself is quoted that way."""
    s = text.strip()
    if len(s) < 2:
        return text
    for opener, closer in _QUOTE_PAIRS:
        if not s.startswith(opener) or _quoted_like(source, opener, closer):
            continue
        inner = s[len(opener):]
        m = re.match(r"^(?P<body>.*)" + re.escape(closer) + r"(?P<punct>[.!?。！？]*)$", inner,
                     re.S)
        if m and closer not in m.group("body") and \
                (opener != closer or opener not in m.group("body")):
            removed.append("quotes")
            return (m.group("body").strip() + m.group("punct")).strip()
        if closer not in inner and (opener == closer or opener not in inner):
            removed.append("quotes")  # opened, never closed
            return inner.strip()
    for _, closer in _QUOTE_PAIRS:  # a closing quote left at the end, never opened
        opener = dict((c, o) for o, c in _QUOTE_PAIRS)[closer]
        core = s.rstrip(".!?。！？")
        if core.endswith(closer) and opener not in core[:-len(closer)] and \
                closer not in core[:-len(closer)] and not source.strip().rstrip(".!?")\
                .endswith(closer):
            removed.append("quotes")
            return (core[:-len(closer)].rstrip() + s[len(core):]).strip()
    return text


_PAREN_NOTE = re.compile(
    r"\s*[(\[（【](?P<note>[^()\[\]（）【】]{1,300})[)\]）】](?P<punct>[.!?。！？]?)\s*$")


def _strip_trailing_comments(text: str, ev: Evidence, removed: list[str]) -> str:
    """Notes in parentheses at the end, and commentary sentences after the first."""
    while (m := _PAREN_NOTE.search(text)) and m.start() > 0:
        note = m.group("note")
        if not (_is_comment(note, ev) or ev.framing_words(note)
                or re.match(r"(?i)\s*(or|oder|ou|o|или|або)\b", note)):
            break
        removed.append("commentary")
        text = text[:m.start()].rstrip() + m.group("punct")
    sentences = _SENTENCE_END.split(text)
    for i in range(1, len(sentences)):
        if _is_comment(sentences[i], ev):
            removed.append("commentary")
            return " ".join(sentences[:i]).strip()
    return text


def _is_comment(sentence: str, ev: Evidence) -> bool:
    """A sentence about the answer rather than part of it."""
    s = sentence.strip().lstrip("*_ ")
    if ev.comment_words and _starts_with(s, COMMENT_STARTS):
        return True
    return ev.framing_words(s) and _starts_with(s, ("this", "that", "it ", "the ", "in ",
                                                    "i ", "here", "dies", "das ", "ceci",
                                                    "cela", "esto", "questo", "isto"))


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
    if _is_label_line(s.split(" ")[0], ev) or _has_lead_label(s, ev):
        return Framing("label", 0)
    src_words = _words(source)
    words = _words(s)
    if len(src_words) >= 3 and len(words) > len(src_words) + 1:
        for i in range(len(words) - len(src_words) + 1):
            if words[i:i + len(src_words)] == src_words:
                return Framing("restated_source", _word_start(s, i))
    sentences = _SENTENCE_END.split(s)
    offset = 0
    for i, sentence in enumerate(sentences):
        if _is_comment(sentence, ev) or (ev.translation_words
                                         and _has_word(sentence, TRANSLATION_WORDS)):
            return Framing("commentary", s.find(sentence, offset) if i else 0)
        offset = s.find(sentence, offset) + len(sentence)
    if s[0] in _OPENING_QUOTES:
        closer = dict(_QUOTE_PAIRS)[s[0]]
        end = s.find(closer, 1)
        if end > 0 and s[end + 1:].strip(" .!?") and not source.strip().startswith(s[0]):
            return Framing("quotes", 0)
    return None


def _has_lead_label(text: str, ev: Evidence) -> bool:
    m = re.match(r"^(?P<lead>[^:：\n]{1,120}?)" + _COLON, text)
    return bool(m and _is_lead_in(m.group("lead"), ev))


def _word_start(text: str, index: int) -> int:
    for i, m in enumerate(_WORDISH.finditer(text)):
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
    if len(_SENTENCE_END.split(s)) > 1:  # after a sentence: a note or a comment may begin
        phrases += tuple(p for p in COMMENT_STARTS if len(p) > 2)
    src = " ".join(_words(source))
    sentences = _SENTENCE_END.split(s)
    tail = sentences[-1]
    head = s[: len(s) - len(tail)].strip()
    said = " ".join(_words(tail))
    if said and src.startswith(said):  # the source's own words: "Here is" for "Here is"
        return s
    if _could_grow_into(tail, phrases, Evidence.for_source(source)):
        return head
    return s


def _could_grow_into(fragment: str, phrases: tuple[str, ...], ev: Evidence) -> bool:
    """The fragment is the beginning of a label or an opener, or an unfinished lead-in
    that names the translation or a language ("Here is the translation", "Die
    Übersetzung ins"): a colon may still come."""
    f = fragment.strip().lstrip(_ALL_QUOTES + " ").casefold()
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
