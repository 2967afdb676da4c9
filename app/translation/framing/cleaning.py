"""``clean_framing``: what can be taken off an answer without guessing (the text after a
blank line or an echoed label, a leading label, wrapping quotes, a restated source before
a separator, trailing notes and commentary sentences), and which kinds were taken off
(``app.translation.framing``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.translation.framing.lexicon import (
    ALL_QUOTES,
    COLON,
    COMMENT_STARTS,
    OPENERS,
    OPENING_QUOTES,
    QUOTE_PAIRS,
    SENTENCE_END,
    SEPARATOR,
    WORDISH,
    Evidence,
    words_of,
)


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


def is_label_line(line: str, ev: Evidence) -> bool:
    """A line that introduces the answer rather than being it: it ends with a colon and
    names the translation or a language, or is an assistant's opener ("Sure!")."""
    s = line.strip()
    if not s:
        return False
    if re.search(COLON + r"\s*$", s):
        return len(s) <= 120 and is_lead_in(re.sub(COLON + r"\s*$", "", s), ev)
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

    while lines and (not lines[0].strip() or is_label_line(lines[0], ev)
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
    return any(not (is_label_line(ln, ev) or (len(ln.strip()) <= 80 and ev.framing_words(ln)
                                               and _starts_with(ln.strip(), OPENERS)))
               for ln in lines)


def _starts_with(text: str, phrases: tuple[str, ...]) -> bool:
    folded = text.casefold().lstrip(ALL_QUOTES + " ")
    return any(folded.startswith(p) for p in phrases)


def _strip_label(text: str, ev: Evidence, removed: list[str]) -> str:
    """A leading label: a lead-in up to a colon (or up to "is" before a quote) that names
    the translation or a language, or opens like an assistant ("Sure! Here it is:")."""
    m = re.match(r"^(?P<lead>[^:：\n]{1,120}?)" + COLON + r"\s*(?P<rest>.+)$", text, re.S)
    if m and is_lead_in(m.group("lead"), ev):
        removed.append("label")
        return m.group("rest").lstrip("*_ ").strip()
    # 'In German, "Good morning" is "Guten Morgen".' / 'The translation is "..."'
    m = re.match(r"^(?P<lead>.{1,160}?\s(?:is|would be|lautet|heißt|ist|est|es|è|é|будет|"
                 r"это|—|-))\s+(?P<rest>[" + re.escape("".join(OPENING_QUOTES)) + r"].+)$",
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


def is_lead_in(lead: str, ev: Evidence) -> bool:
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
    return all(w in _FILLERS for w in words_of(stripped)[1:])


def _squash(text: str) -> str:
    return "".join(w for w in words_of(text))


def _strip_restated(text: str, source: str, removed: list[str]) -> str:
    """A source restated before its translation: '"Good morning, everyone." = Guten
    Morgen zusammen.' or 'Good morning, everyone. -> Guten Morgen zusammen.'."""
    src_words = words_of(source)
    if len(src_words) < 2:
        return text
    body = text.lstrip(ALL_QUOTES + " ")
    words = words_of(body)
    if len(words) <= len(src_words) or words[:len(src_words)] != src_words:
        return text
    # where the restated source ends in ``body``
    pos, seen = 0, 0
    for m in WORDISH.finditer(body):
        seen += 1
        pos = m.end()
        if seen == len(src_words):
            break
    tail = body[pos:].lstrip(ALL_QUOTES + ".,!? ")
    sep = SEPARATOR.match(body[pos:].lstrip(ALL_QUOTES + ".,!?"))
    if sep is None and not re.match(r"(?i)(means|is|heißt|bedeutet|signifie|significa)\b",
                                    tail):
        return text
    rest = body[pos:].lstrip(ALL_QUOTES + ".,!?")
    rest = SEPARATOR.sub("", rest, count=1) if sep else \
        re.sub(r"(?i)^\s*(means|is|heißt|bedeutet|signifie|significa)\b[^\w" +
               re.escape(ALL_QUOTES) + r"]*", "", rest, count=1)
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
    for opener, closer in QUOTE_PAIRS:
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
    for _, closer in QUOTE_PAIRS:  # a closing quote left at the end, never opened
        opener = dict((c, o) for o, c in QUOTE_PAIRS)[closer]
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
        if not (is_comment(note, ev) or ev.framing_words(note)
                or re.match(r"(?i)\s*(or|oder|ou|o|или|або)\b", note)):
            break
        removed.append("commentary")
        text = text[:m.start()].rstrip() + m.group("punct")
    sentences = SENTENCE_END.split(text)
    for i in range(1, len(sentences)):
        if is_comment(sentences[i], ev):
            removed.append("commentary")
            return " ".join(sentences[:i]).strip()
    return text


def is_comment(sentence: str, ev: Evidence) -> bool:
    """A sentence about the answer rather than part of it."""
    s = sentence.strip().lstrip("*_ ")
    if ev.comment_words and _starts_with(s, COMMENT_STARTS):
        return True
    return ev.framing_words(s) and _starts_with(s, ("this", "that", "it ", "the ", "in ",
                                                    "i ", "here", "dies", "das ", "ceci",
                                                    "cela", "esto", "questo", "isto"))
