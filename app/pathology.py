"""Outputs that are no translation, recognised so that no bias can keep them.

SSBD reuses the previous output as the next update's draft and, with beta > 0, wins every
near-tie for it. That is what makes captions calm, and also what locks a bad early output
in: measured on FLORES and ACL 60/60, beta 0.2 doubled the finals that were a copy of the
English source or a prompt example. The detectors here name those outputs so that the
session drops them as drafts (counted, reported in the ``livetrans`` object and in caption
stats) and the eval harness can count them among the finals, where an average hides them.

Kinds, in the order ``diagnose`` reports them (one kind per output):

* ``loop``: the output ran into the length cap or repeats one span back to back;
* ``prompt_example``: the output reproduces one of the prompt's example translations
  while the source is not that example's source (the model answered the prompt, not the
  speaker);
* ``copy``: the output repeats the source's words instead of translating them;
* ``wrong_script``: the output is written in a script the target language does not use
  (Latin letters where Chinese or Japanese is expected, ...).

The detectors are deliberately conservative: a false alarm only costs a draft (speed), but
they must catch the copies a 270M model produces for short fragments. Names and numbers
are copied legitimately by any translation, so the copy test only counts lower-case words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from difflib import SequenceMatcher

KINDS = ("loop", "prompt_example", "copy", "wrong_script")

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


def _lower_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.islower() and len(w) > 1]


def copies_source(output: str, source: str, min_words: int = 2,
                  threshold: float = 0.75) -> bool:
    """The output repeats the source's words: at least ``threshold`` of its lower-case words
    (at least ``min_words`` of them) occur in the source, and those copied words make up
    at least half of the output's letters.

    Lower-case words only: names, acronyms and numbers pass through any translation, while
    a translation into another language shares few function words with its source. The
    share of letters keeps a Chinese sentence that quotes a few English terms ("如podcast,
    app, and online crowdfunding，这些都是...") from counting as a copy; a CJK character
    weighs as two letters (it carries about a word's worth of a Latin text's letters).
    """
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
    """The output is (most of) an example translation whose source the speaker did not say.

    ``examples`` are the prompt's (source, translation) pairs. Containment in either
    direction counts: the model may emit a piece of an example or an example plus a tail.
    The output must also be long enough to be an answer (a shared word or two is not).
    """
    squashed = _squash(output)
    for example_source, example_target in examples:
        if len(squashed) < min(8, len(_squash(example_target))):
            continue
        if _similar(output, example_target) >= threshold and \
                _similar(source, example_source) < threshold:
            return True
    return False


def diagnose(output: str, source: str, target_lang: str, *,
             examples: Sequence[tuple[str, str]] = (), runaway: bool = False) -> str | None:
    """The first pathology ``output`` shows (a name from ``KINDS``), or None."""
    if runaway:
        return "loop"
    if not output.strip():
        return None
    if examples and reproduces_example(output, source, examples):
        return "prompt_example"
    if copies_source(output, source):
        return "copy"
    if wrong_script(output, target_lang):
        return "wrong_script"
    return None
