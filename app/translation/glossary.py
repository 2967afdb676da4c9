"""Glossaries: an organiser's term list, which entries apply to a source, and what a
translation missed.

A glossary maps source terms to the target terms a translation must use (API.md
``glossary``). An entry *applies* to an update whose source contains its source term,
case-insensitively and on word boundaries ("API" applies to "the API is", not to
"rapid"). A translation *misses* an applied entry when its target term is not in the
output (case-insensitively): that is the ``glossary_miss`` pathology of a final.

Pure text logic: no model, no HTTP. Validation of what a client sends lives here too, so
that HTTP and WebSocket refuse the same glossaries with the same sentences.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from drafters.scripts import SPACED_WORD_CHAR, spaced_word_char

MAX_ENTRIES = 200
MAX_TERM_CHARS = 100


class GlossaryError(ValueError):
    """A glossary the server will not use; the message names the entry."""


def _bad_chars(term: str) -> bool:
    """Control characters (newlines included) and lone surrogates: a term is one line of
    text, and a newline in it would end a few-shot line of the prompt."""
    return any(unicodedata.category(ch) in ("Cc", "Cs") for ch in term)


def check_glossary(value: object) -> dict[str, str]:
    """A client's glossary as ``{source term: target term}``, or ``GlossaryError``.

    At most ``MAX_ENTRIES`` entries; each term a non-blank string of at most
    ``MAX_TERM_CHARS`` characters with no control characters; source terms distinct when
    compared case-insensitively (two entries for one term would contradict each other).
    """
    if not isinstance(value, Mapping):
        raise GlossaryError("glossary: an object of {\"source term\": \"target term\"}")
    if len(value) > MAX_ENTRIES:
        raise GlossaryError(f"glossary: {len(value)} entries; the limit is {MAX_ENTRIES}")
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for n, (src, tgt) in enumerate(value.items(), 1):
        for what, term in (("source term", src), ("target term", tgt)):
            if not isinstance(term, str):
                raise GlossaryError(f"glossary entry {n}: the {what} must be a string")
            if not term.strip():
                raise GlossaryError(f"glossary entry {n}: the {what} is empty")
            if len(term) > MAX_TERM_CHARS:
                raise GlossaryError(f"glossary entry {n}: the {what} has {len(term)} "
                                    f"characters; the limit is {MAX_TERM_CHARS}")
            if _bad_chars(term):
                raise GlossaryError(f"glossary entry {n}: the {what} holds a control "
                                    "character (one line of text per term)")
        key = " ".join(src.split()).casefold()
        if key in seen:
            raise GlossaryError(f"glossary entry {n}: the source term repeats entry "
                                f"{seen[key]} (compared case-insensitively)")
        seen[key] = str(n)
        out[" ".join(src.split())] = " ".join(tgt.split())
    return out


@dataclass(frozen=True)
class Term:
    source: str
    target: str


def term_pattern(term: str) -> re.Pattern[str]:
    """``term`` on word boundaries, any case, any run of spaces between its words.

    A boundary is the edge of a word character only where the term itself starts or ends
    with one: "C++" or "Node.js" match where they stand; and only against scripts that
    put spaces between words: "機械翻訳" is found in "私は機械翻訳が好き", "AI" in "AIは"."""
    words = [re.escape(w) for w in term.split()]
    body = r"\s+".join(words)
    edge = term.strip()
    # the boundary: no letter or digit of a spaced script beside it ("AIは" holds "AI")
    start = f"(?<!{SPACED_WORD_CHAR})" if edge and spaced_word_char(edge[0]) else ""
    end = f"(?!{SPACED_WORD_CHAR})" if edge and spaced_word_char(edge[-1]) else ""
    return re.compile(start + body + end, re.IGNORECASE)


def applicable(glossary: Mapping[str, str] | None, source: str) -> list[Term]:
    """The entries whose source term occurs in ``source``, longest source term first (so a
    prompt shows "machine translation" before "translation")."""
    if not glossary:
        return []
    found = [Term(s, t) for s, t in glossary.items() if term_pattern(s).search(source)]
    return sorted(found, key=lambda term: -len(term.source))


def contains_term(text: str, target: str) -> bool:
    """The target term is in ``text``, case-insensitively and with any spacing; inside a
    longer word too (German writes a term into compounds: "Modell" in "Sprachmodell")."""
    return " ".join(target.split()).casefold() in " ".join(text.split()).casefold()


def missed(terms: list[Term], output: str) -> list[str]:
    """Source terms of the applied entries whose target term is not in ``output``."""
    return [term.source for term in terms if not contains_term(output, term.target)]


def with_target_terms(source: str, terms: list[Term], missing: list[str]) -> str:
    """``source`` with each occurrence of a missing entry's source term replaced by its
    target term, longest first: the glossary repair's source, from which the model carries
    the target term over where it belongs (constrained translation by a code-switched
    source). The replacement is the organiser's glossary text, still data in the prompt."""
    text = source
    for term in sorted((t for t in terms if t.source in missing), key=lambda t: -len(t.source)):
        text = term_pattern(term.source).sub(lambda _m, target=term.target: target, text)
    return text


def glossary_field(value: object) -> dict[str, str] | None:
    """A request's ``glossary`` field, checked (a pydantic before-validator for the HTTP
    and WebSocket schemas alike): a bad glossary is a ``ValueError`` naming what is wrong."""
    if value is None:
        return None
    try:
        return check_glossary(value)
    except GlossaryError as exc:
        raise ValueError(str(exc)) from None
