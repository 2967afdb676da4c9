"""Outputs that are no translation, recognised so that no bias can keep them.

SSBD reuses the previous output as the next update's draft and, with beta > 0, wins every
near-tie for it. That is what makes captions calm, and also what locks a bad early output
in: measured on FLORES and ACL 60/60, beta 0.2 doubled the finals that were a copy of the
English source or a prompt example. The detectors here name those outputs so that the
session drops them as drafts (counted, reported in the ``livetrans`` object and in caption
stats) and the eval harness can count them among the finals, where an average hides them.

Kinds, in the order ``diagnose`` reports them (one kind per output):

* ``loop``: the output ran into the length cap, or the engine's token-level detector ended
  it (``runaway``), or its text repeats itself back to back (``loop_cut``): a word
  ("Text-Text-Text-Text"), a phrase or hyphen-joined fragments ("Text-Caption-Text-Caption-
  Text-Caption"), a run of characters ("!!!!!!!!!!!!"), or characters of an unspaced script
  ("我们的我们的我们的");
* ``prompt_example``: the output reproduces one of the prompt's example translations (a
  few-shot example, or an earlier final shown as context) while the source is not that
  example's source (the model answered the prompt, not the speaker);
* ``copy``: the output repeats the source's words instead of translating them;
* ``wrong_script``: the output is written in a script the target language does not use
  (Latin letters where Chinese or Japanese is expected, ...);
* ``label``, ``quotes``, ``restated_source``, ``commentary`` (``FRAMING_KINDS``, only for
  prompts whose answers are cleaned: instruction models on their chat template): framing
  an instruction model put round the translation and ``app.translation.framing`` could not
  take off (see ``find_framing``).

The detectors are deliberately conservative: a false alarm costs a retry of a final, but
they must catch the copies a 270M model produces for short fragments. What happens to each
kind (retried, cut, flagged) is ``app.translation.translator``'s; README "Faithful finals" lists it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from app.translation.framing import find_framing

FRAMING_KINDS = ("label", "quotes", "restated_source", "commentary")
KINDS = ("loop", "prompt_example", "copy", "wrong_script", *FRAMING_KINDS)


def fit_for_context(pathology: str | None) -> bool:
    """Whether a final may join the talk's context (``app.translation.sessions``): one that is no
    translation (a loop, a copy of the source or of an example, the wrong script) would
    teach the next segments to fail the same way. A final missing a glossary term is
    still a translation."""
    return pathology not in KINDS

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def ends_in_loop(tokens: Sequence[int], max_period: int = 16, min_repeats: int = 3,
                 min_span: int = 12) -> bool:
    """True when ``tokens`` ends with one span repeated back to back, covering at least
    ``min_span`` tokens and ``min_repeats`` copies.

    Small models sometimes fall into loops ("am Montag, am Dienstag, am Montag, ...") and
    would run to ``max_tokens``; a translation never legitimately does this.
    """
    tokens = list(tokens)
    n = len(tokens)
    for period in range(1, max_period + 1):
        repeats = max(min_repeats, -(-min_span // period))
        if period * repeats > n:
            continue
        tail = tokens[n - period:]
        if all(tokens[n - (r + 1) * period: n - r * period] == tail for r in range(1, repeats)):
            return True
    return False


# -- loops in text ---------------------------------------------------------------------------
# A text is compared unit by unit: a word of a spaced script (case-folded, punctuation and
# hyphens between words ignored, so "Text-Caption" and "text, caption" are the same two
# units), or one character of an unspaced script (Chinese, Japanese), where a word has no
# visible edges and a loop repeats character n-grams ("我们的我们的我们的").
_UNIT = re.compile(r"[^\W_]+")
_UNSPACED = frozenset({"han", "kana"})
# Repeats of one to four characters inside a word or of punctuation ("aaaa", "!!!!").
_CHAR_REPEAT = re.compile(r"(\S{1,4}?)\1{3,}")


@dataclass(frozen=True)
class _Unit:
    key: str  # what is compared: the case-folded word or character
    start: int  # where it is in the text (characters)
    end: int
    unspaced: bool  # one character of Chinese or Japanese

    @property
    def numeric(self) -> bool:
        return self.key.isdigit()


def _units(text: str) -> list[_Unit]:
    units: list[_Unit] = []
    for m in _UNIT.finditer(text):
        run_start = m.start()
        for i, ch in enumerate(m.group(), m.start()):
            if script_of(ch) in _UNSPACED:
                if run_start < i:
                    units.append(_Unit(text[run_start:i].casefold(), run_start, i, False))
                units.append(_Unit(ch, i, i + 1, True))
                run_start = i + 1
        if run_start < m.end():
            units.append(_Unit(text[run_start:m.end()].casefold(), run_start, m.end(), False))
    return units


def _repeats_needed(period: list[_Unit]) -> int:
    """How many back-to-back copies of ``period`` make a loop rather than emphasis.

    Words: four of one word ("very, very, very" and "Nein, nein, nein!" are speech), three
    of a phrase. Numbers repeat legitimately ("0.0.0.0", "00:00:00"): six. Characters of an
    unspaced script: eight characters in all and at least three copies ("哈哈哈哈",
    "はいはいはい", "一个一个" are words of the language).
    """
    if all(u.unspaced for u in period):
        return max(3, -(-8 // len(period)))
    if all(u.numeric for u in period):
        return 6
    return 4 if len(period) == 1 else 3


def _periodic_runs(units: list[_Unit], max_period: int) -> list[tuple[int, int, int]]:
    """Every maximal stretch of ``units`` that repeats a span of ``period`` units back to
    back: (start, period, full copies), for periods up to ``max_period``."""
    keys = [u.key for u in units]
    runs = []
    for period in range(1, max_period + 1):
        streak = 0
        for i in range(period, len(keys) + 1):
            if i < len(keys) and keys[i] == keys[i - period]:
                streak += 1
                continue
            if streak >= period:  # at least two full copies
                start = i - streak - period
                runs.append((start, period, (streak + period) // period))
            streak = 0
    return runs


def _loop_runs(units: list[_Unit], max_period: int) -> list[tuple[int, int]]:
    """(start, period) of each repetition long enough to be a loop."""
    return [(start, period) for start, period, copies in _periodic_runs(units, max_period)
            if copies >= _repeats_needed(units[start:start + period])]


def _periodic_tail(units: list[_Unit], end: int, loop_keys: set[str],
                   max_period: int) -> tuple[int, int] | None:
    """Where the text before ``end`` starts repeating itself: (start, period) of a span
    that repeats back to back up to ``end`` (two copies or more) and shares a unit with
    the loop; the earliest start when several do. "Text-Caption-Text-Caption-Text" before
    "-Text-Text-Text" keeps "Text-Caption": the loop began before its longest stretch did."""
    keys = [u.key for u in units[:end]]
    best = None
    for period in range(1, max_period + 1):
        streak = 0
        while streak < end - period and keys[end - 1 - streak] == keys[end - 1 - streak - period]:
            streak += 1
        if streak < period or not loop_keys & set(keys[end - streak - period:end]):
            continue
        if best is None or end - streak - period < best[0]:
            best = (end - streak - period, period)
    return best


def _boundary(text: str, units: list[_Unit], start: int, period: int) -> int:
    """How many units to keep of a repetition that starts at unit ``start``: one copy of
    the span, ended where the text has a break.

    Where a repetition starts is a matter of phase ("...借用語について、その意味について、
    そしてその意味について、そして..." repeats "てその意味について、そし" from the first "て"): the
    last break between units within the first copy, punctuation before a space, makes the
    kept text end on a word or clause ("...その意味について"); without one, the whole copy.
    """
    def gap(k: int) -> str:
        return text[units[k - 1].end:units[k].start]

    window = range(start + period, start, -1)
    for wanted in (lambda g: g.strip(), lambda g: g):
        for k in window:
            if k < len(units) and wanted(gap(k)):
                return k
    return start + period


def _seen_tail(units: list[_Unit], min_units: int = 2) -> int | None:
    """The start of the longest tail made only of unit pairs that occurred earlier (the
    text has stopped saying anything new), when it spans ``min_units`` units or more; for a
    runaway output whose repetition is not strictly periodic (a list of weekdays that wraps
    round)."""
    keys = [u.key for u in units]
    seen: set[tuple[str, str]] = set()
    first_new = 0  # the last position whose pair was new, +1
    for i in range(1, len(keys)):
        pair = (keys[i - 1], keys[i])
        if pair not in seen:
            first_new = i + 1
        seen.add(pair)
    start = max(1, first_new - 1)  # the pair at ``first_new`` begins one unit earlier
    return start if len(keys) - start >= min_units else None


def loop_cut(text: str, runaway: bool = False, max_period: int = 24) -> int | None:
    """Where ``text`` starts to loop: ``text[:cut]`` is the text before the repetition
    (with one copy of the repeated span), or None when the text does not loop.

    A loop is a span repeated back to back often enough (``_repeats_needed``): a word, a
    phrase, hyphen- or punctuation-joined fragments, characters of Chinese or Japanese, or a
    run of one to four characters (12 or more, digits excluded: "hahahahahaha", "!!!!!!!!!!!!"
    but not "Hahaha" or "1,000,000,000,000"). When ``runaway`` (the output was cut at the
    length cap or by the engine's token loop detector) and no such repetition is found, a
    tail that only repeats earlier word pairs is cut instead.
    """
    units = _units(text)
    cuts: list[int] = []
    runs = _loop_runs(units, max_period)
    for start, period in runs:
        end = _boundary(text, units, start, period)
        loop_keys = {u.key for u in units[start:start + period]}
        while (tail := _periodic_tail(units, end, loop_keys, max_period)) is not None \
                and tail[0] + tail[1] < end:
            end = _boundary(text, units, *tail)
        cuts.append(units[end - 1].end)
    for m in _CHAR_REPEAT.finditer(text):
        if len(m.group()) >= 12 and not any(ch.isdigit() for ch in m.group(1)):
            cuts.append(m.start() + len(m.group(1)))
    if not cuts and runaway and (seen := _seen_tail(units)) is not None:
        cuts.append(units[seen - 1].end)
    return min(cuts) if cuts else None


def loops(text: str) -> bool:
    """The text repeats itself back to back (see ``loop_cut``)."""
    return loop_cut(text) is not None


# -- copies of the source ----------------------------------------------------------------------
def _lower_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.islower() and len(w) > 1]


# A run of Chinese or Japanese characters is one "word" apart from the Latin letters it
# touches ("英国的报纸The Guardian"): the Latin words are the ones a copy shares.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_FOLDED_WORD = re.compile(rf"[{_CJK}]+|[^\W\d_{_CJK}]+(?:['’][^\W\d_{_CJK}]+)*")


def _folded_words(text: str) -> list[str]:
    return [w.casefold() for w in _FOLDED_WORD.findall(text)]


def made_of_source(output: str, source: str, min_words: int = 3,
                   threshold: float = 0.9) -> bool:
    """The output is essentially (a piece of) the source, whatever its capitalisation,
    punctuation and spacing: at least ``threshold`` of its words (``min_words`` or more)
    occur in the source, compared case-insensitively; a word of four letters or more also
    counts when the source has it with other spacing ("lefthand" for "left hand").

    A translation that keeps a name or a title ("Das iPhone", 'Das Paper "Attention Is All
    You Need" hat alles verändert', '"Panama Papers" ist') has words of its own and passes:
    one new word in ten is enough. Numbers count for neither side; two words (a name) are
    too few to tell.
    """
    words = _folded_words(output)
    if len(words) < min_words:
        return False
    source_words = set(_folded_words(source))
    squashed = _squash(source)
    copied = sum(1 for w in words if w in source_words or (len(w) >= 4 and w in squashed))
    return copied >= threshold * len(words)


# Words of an unfinished answer that must all be the source's before it is given up as a
# copy (``begins_as_copy``), and how many of them lower-case: names, acronyms and numbers
# pass through any translation ("Apple CEO Steve Jobs" began a clean de-en answer), while a
# translation shares few lower-case words with its source. Measured on first attempts of
# FLORES and ACL 60/60 dev finals (reports/2026-11-28-copy-given-up/).
COPY_START_WORDS = 4
COPY_START_LOWER = 3


def begins_as_copy(words_so_far: str, source: str, min_words: int = COPY_START_WORDS,
                   min_lower: int = COPY_START_LOWER) -> bool:
    """An unfinished answer whose complete words so far (``min_words`` or more, of them
    ``min_lower`` lower-case) are every one the source's (``made_of_source`` with nothing
    of its own): it is repeating the source, not translating it, and will be diagnosed a
    ``copy`` when it ends. A translation that keeps a name or a title has words of its own
    around it, or too few lower-case ones, before it could trip this."""
    return (len(_lower_words(words_so_far)) >= min_lower
            and made_of_source(words_so_far, source, min_words=min_words, threshold=1.0))


def copies_source(output: str, source: str, min_words: int = 2,
                  threshold: float = 0.75) -> bool:
    """The output repeats the source's words: it is essentially the source
    (``made_of_source``, whatever the capitalisation), or at least ``threshold`` of its
    lower-case words (at least ``min_words`` of them) occur in the source, and those copied
    words make up at least half of the output's letters.

    Lower-case words only for a partial copy: names, acronyms and numbers pass through any
    translation, while a translation into another language shares few function words with
    its source. The share of letters keeps a Chinese sentence that quotes a few English
    terms ("如podcast, app, and online crowdfunding，这些都是...") from counting as a copy; a
    CJK character weighs as two letters (it carries about a word's worth of a Latin text's
    letters).
    """
    if made_of_source(output, source):
        return True
    words = _lower_words(output)
    if len(words) < min_words:
        return False
    source_words = {w.lower() for w in _WORD.findall(source)}
    copied = [w for w in words if w in source_words]
    if len(copied) < threshold * len(words):
        return False
    letters = sum(2 if script_of(ch) in _WIDE_SCRIPTS else 1 for ch in output if ch.isalpha())
    return sum(len(w) for w in copied) >= 0.5 * letters


# Unicode script of a letter, by block; enough to tell the scripts our targets use apart.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x024F, "latin"), (0x1E00, 0x1EFF, "latin"),
    (0x0370, 0x03FF, "greek"),
    (0x0400, 0x052F, "cyrillic"),
    (0x3040, 0x309F, "kana"), (0x30A0, 0x30FF, "kana"), (0x31F0, 0x31FF, "kana"),
    (0xFF66, 0xFF9F, "kana"),
    (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"), (0xF900, 0xFAFF, "han"),
    (0x20000, 0x2FA1F, "han"),
    (0xAC00, 0xD7AF, "hangul"),
    (0xFF21, 0xFF5A, "latin"),
)

TARGET_SCRIPTS: dict[str, frozenset[str]] = {
    "zh": frozenset({"han"}),
    "ja": frozenset({"han", "kana"}),
    "ru": frozenset({"cyrillic"}),
    "uk": frozenset({"cyrillic"}),
}
_DEFAULT_SCRIPTS = frozenset({"latin"})
_WIDE_SCRIPTS = frozenset({"han", "kana", "hangul"})


def script_of(ch: str) -> str | None:
    """The script of one letter, or None for what is not a letter (digits, punctuation)."""
    if not ch.isalpha():
        return None
    cp = ord(ch)
    for lo, hi, name in _SCRIPT_RANGES:
        if lo <= cp <= hi:
            return name
    return unicodedata.name(ch, "other").split(" ")[0].lower()


def wrong_script(output: str, target_lang: str, min_letters: int = 4,
                 threshold: float = 0.5) -> bool:
    """Fewer than ``threshold`` of the output's letters are in the target's scripts.

    A handful of letters (a name, an acronym) decides nothing: at least ``min_letters``.
    """
    expected = TARGET_SCRIPTS.get(target_lang, _DEFAULT_SCRIPTS)
    scripts = [s for s in (script_of(ch) for ch in output) if s is not None]
    if len(scripts) < min_letters:
        return False
    in_script = sum(1 for s in scripts if s in expected)
    return in_script < threshold * len(scripts)


def _squash(text: str) -> str:
    return "".join(ch.lower() for ch in text if ch.isalnum())


def _similar(a: str, b: str, min_block: int = 4) -> float:
    """How much of the shorter string the longer one contains, in order, counting only
    shared runs of at least ``min_block`` characters (0..1).

    Single shared letters would make any short output "contained" in a long example
    ("Der Pilot war" spelled out inside "Der Zug zum Flughafen ..."); runs make it a copy.
    """
    a, b = _squash(a), _squash(b)
    if min(len(a), len(b)) < min_block:
        return 0.0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks()
                  if block.size >= min_block)
    return matched / min(len(a), len(b))


def reproduces_example(output: str, source: str, examples: Sequence[tuple[str, str]],
                       threshold: float = 0.7) -> bool:
    """The output is (most of) an example, its translation or its source sentence, whose
    source the speaker did not say.

    ``examples`` are the prompt's (source, translation) pairs. Containment in either
    direction counts: the model may emit a piece of an example or an example plus a tail.
    An example's source side counts too: a small model given examples right before the
    source repeats one of them as it was written ("So on the right side you can see" as
    a German final, seen in retries). The output must also be long enough to be an answer
    (a shared word or two is not).
    """
    squashed = _squash(output)
    for example_source, example_target in examples:
        if _similar(source, example_source) >= threshold:
            continue  # the speaker said it: its translation may well read like it
        for shown in (example_target, example_source):
            if len(squashed) >= min(8, len(_squash(shown))) and \
                    _similar(output, shown) >= threshold:
                return True
    return False


def diagnose(output: str, source: str, target_lang: str, *,
             examples: Sequence[tuple[str, str]] = (), runaway: bool = False,
             framing: bool = False) -> str | None:
    """The first pathology ``output`` shows (a name from ``KINDS``), or None.

    ``framing``: the answer of an instruction model, where framing round the translation
    is looked for too (``FRAMING_KINDS``); a base model's few-shot line has none."""
    if runaway or loops(output):
        return "loop"
    if not output.strip():
        return None
    if examples and reproduces_example(output, source, examples):
        return "prompt_example"
    if copies_source(output, source):
        return "copy"
    if framing and (found := find_framing(output, source)) is not None:
        return found.kind
    if wrong_script(output, target_lang):
        return "wrong_script"
    return None
