"""Prompt formats, in one place.

The translation prompt decides what the model sees, and therefore what a draft must match:
a translation is the token sequence the model emits *after* the prompt, up to the stop
condition. Two formats exist:

* ``FewShotFormat`` for base (non-instruction) models such as the default Gemma 3 270M: a
  few parallel sentences as ``English: ... / German: ...`` lines, then the source, then the
  target-language label. The model continues the line and stops at a newline.
* ``ChatTemplateFormat`` for instruction models that ship a chat template: one user turn
  asking for the translation; the model stops at its end-of-turn token.

The format is chosen from the model's metadata (``choose_prompt_format``). The example
sentences below were written for this project (none come from FLORES or ACL 60/60).

The package, one job a module: ``languages.py`` (the languages served, and the check of a
code), ``examples.py`` (the parallel example sentences), ``parts.py`` (a prompt as parts
of ours and of the user's, and their tokenizing), ``few_shot.py`` and ``chat.py`` (the two
formats) and ``formats.py`` (which format a model gets). The names below are the
package's API: importers keep ``app.translation.prompts``.
"""

from __future__ import annotations

from app.translation.prompts.chat import ANSWER_STOPS, ChatTemplateError, ChatTemplateFormat
from app.translation.prompts.examples import FEW_SHOT_EXAMPLES
from app.translation.prompts.few_shot import FewShotFormat
from app.translation.prompts.formats import (
    FORMAT_NAMES,
    PromptFormat,
    choose_prompt_format,
    render_plain_chat,
)
from app.translation.prompts.languages import (
    LANGUAGE_NAMES,
    UnsupportedLanguageError,
    check_language,
    direction,
)
from app.translation.prompts.parts import (
    PromptPart,
    Tokenize,
    TranslationPrompt,
    clean_source,
    neutralise_labels,
    ours,
    tokenize_prompt,
    user,
)

__all__ = [
    "ANSWER_STOPS", "ChatTemplateError", "ChatTemplateFormat", "FEW_SHOT_EXAMPLES",
    "FORMAT_NAMES", "FewShotFormat", "LANGUAGE_NAMES", "PromptFormat", "PromptPart",
    "Tokenize", "TranslationPrompt", "UnsupportedLanguageError", "check_language",
    "choose_prompt_format", "clean_source", "direction", "neutralise_labels", "ours",
    "render_plain_chat", "tokenize_prompt", "user",
]
