"""Built-in counting text for a trim without corpora: the ``wordfreq`` package's word lists.

``serve --langs`` trims the model on first start, when nobody has handed it text in the
served languages. ``wordfreq`` carries well-kept frequency lists (Wikipedia, subtitles,
news, books, web text and more, merged) for every language livetrans serves, so the
commonest words a speaker says and a translation writes are known without a corpus.

The lists are lower case (case-folded: German ``ß`` is listed as ``ss``); running text is
not. Each word is counted as it appears inside a sentence (`` word``) and at a sentence's
start or as a German noun (`` Word``), German words with ``ss`` also with ``ß``. Words are
counted in lines of many words: the tokenizer's pieces never span the space between two
words (checked: the same counts on 20,000 German words), so a line gives the same pieces as
its words one by one, several times faster.
Chinese and Japanese are written without spaces: there each word is a line of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from drafters.segment import leading

DEFAULT_WORDS = 50_000  # words per language (the lists hold 100k-500k)
_WORDS_PER_LINE = 200


class WordListError(RuntimeError):
    """``wordfreq`` is missing or has no list for a language (one sentence)."""


def word_forms(word: str, lang: str = "") -> list[str]:
    """The spellings of a list word counted: as listed (lower case) and capitalised; for
    German also with ``ß`` for ``ss``, since wordfreq case-folds ``größer`` to ``grösser``
    (without it " größer", " Spaß", " regelmäßig" were missing from the copy; a wrong
    guess such as "waßer" only keeps a few pieces more)."""
    spellings = [word]
    if lang == "de" and "ss" in word:
        spellings.append(word.replace("ss", "ß"))
    forms: list[str] = []
    for spelling in spellings:
        capital = spelling[:1].upper() + spelling[1:]
        forms += [spelling] if capital == spelling else [spelling, capital]
    return forms


def frequency_lines(lang: str, n_words: int = DEFAULT_WORDS) -> Iterator[str]:
    """The ``n_words`` commonest words of ``lang`` in their counted forms, many per line
    (separated by spaces), or one per line for a language written without spaces."""
    try:
        import wordfreq
    except ImportError:  # pragma: no cover - a core dependency
        raise WordListError("the wordfreq package is missing: pip install wordfreq") from None
    if lang not in wordfreq.available_languages(wordlist="best"):
        # (wordfreq itself would fall back to the nearest language it has, say English)
        raise WordListError(f"wordfreq has no word list for '{lang}'")
    words = wordfreq.top_n_list(lang, n_words, wordlist="best")
    forms = [form for word in words for form in word_forms(word, lang)]
    if leading(lang) == "":
        yield from forms
        return
    for i in range(0, len(forms), _WORDS_PER_LINE):
        yield " ".join(forms[i:i + _WORDS_PER_LINE])
