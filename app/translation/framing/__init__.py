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

The package, one job a module: ``lexicon.py`` (the words, in every supported language, and
the ``Evidence`` a source gives against them), ``cleaning.py`` (``clean_framing``),
``finding.py`` (``find_framing``, ``cut_framing``) and ``partials.py`` (``held_back``,
``StreamCleaner``).
"""

from __future__ import annotations

from app.translation.framing.cleaning import Cleaned, answer_begun, clean_framing
from app.translation.framing.finding import Framing, cut_framing, find_framing
from app.translation.framing.partials import StreamCleaner, held_back

__all__ = ["Cleaned", "Framing", "StreamCleaner", "answer_begun", "clean_framing", "cut_framing",
           "find_framing", "held_back"]
