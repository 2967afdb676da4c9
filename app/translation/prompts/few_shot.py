"""The few-shot format for base models: ``English: ... / German: ...`` lines, then the
source and the target's label; the answer ends at a newline (``app.translation.prompts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.translation.prompts.examples import FEW_SHOT_EXAMPLES
from app.translation.prompts.languages import LANGUAGE_NAMES
from app.translation.prompts.parts import (
    PromptPart,
    TranslationPrompt,
    clean_source,
    merged,
    neutralise_labels,
    ours,
    user,
)


def _data(text: str) -> str:
    """User text as it goes into a few-shot line: one line, no labels."""
    return neutralise_labels(clean_source(text))


@dataclass(frozen=True)
class FewShotFormat:
    """``English: ... / German: ...`` lines for base models; the answer ends at a newline."""

    name: str = "few-shot"
    n_examples: int = 3
    # the retry's extra examples after the talk's context (``retry_translation``); False:
    # all of them before it, as before, for ``livetrans bench retries`` to compare
    late_retry_examples: bool = True

    def examples(self, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
        """The (source, translation) pairs the prompt shows, for the leakage detector."""
        return list(zip(FEW_SHOT_EXAMPLES[source_lang][: self.n_examples],
                        FEW_SHOT_EXAMPLES[target_lang][: self.n_examples], strict=True))

    def shown_examples(self, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
        """Every (source, translation) pair a prompt of this format shows, the retry's
        included (``retry_translation``): the pairs the leakage detector looks for."""
        return list(zip(FEW_SHOT_EXAMPLES[source_lang], FEW_SHOT_EXAMPLES[target_lang],
                        strict=True))

    def translation(self, source: str, source_lang: str, target_lang: str,
                    context: Sequence[tuple[str, str]] = (),
                    terms: Sequence[tuple[str, str]] = (),
                    late_examples: Sequence[tuple[str, str]] = ()) -> TranslationPrompt:
        """The few-shot prompt for ``source``.

        ``terms`` (glossary entries that apply) and ``context`` (the talk's previous
        finals, oldest first) are more ``<Language>: ...`` pairs, as data: the model reads
        the required terms and the talk so far the way it reads the examples. The terms
        come first, before the examples: right before the source, a term pair was the
        pattern the model copied, answering a whole sentence with the term alone
        ("Lexical Entlehnung": 13 of 100 ACL finals, none without a glossary). Separated
        from the source by full sentences, a new term costs the KV cache the examples and
        the context (a few times a segment), and the context stays one fixed prefix while
        a segment's updates arrive. ``late_examples`` (the retry's, ``retry_translation``)
        are more examples after the context, right before the source.
        """
        src_name = LANGUAGE_NAMES[source_lang]
        tgt_name = LANGUAGE_NAMES[target_lang]

        def pairs(items: Sequence[tuple[str, str]]) -> list[PromptPart]:
            out: list[PromptPart] = []
            for src, tgt in items:
                out += [ours(f"{src_name}:"), user(" " + _data(src)),
                        ours(f"\n{tgt_name}:"), user(" " + _data(tgt)), ours("\n\n")]
            return out

        def shown(items: Sequence[tuple[str, str]]) -> str:  # our examples, each a block
            return "".join(f"{src_name}: {src}\n{tgt_name}: {tgt}\n\n" for src, tgt in items)

        parts: list[PromptPart] = [*pairs(terms),
                                   ours(shown(self.examples(source_lang, target_lang))),
                                   *pairs(context), ours(shown(late_examples))]
        text = _data(source)
        # No trailing space after the label: the model emits the space as part of its first
        # token (" Der"), which is the form drafts and dictionaries are built in. The space
        # before the source belongs to the user part, where the tokenizer puts it anyway.
        parts += [ours(f"{src_name}:"), user(" " + text if text else ""),
                  ours(f"\n{tgt_name}:")]
        return TranslationPrompt(parts=merged(parts), source=clean_source(source),
                                 stop_at_newline=True)

    def retry_translation(self, source: str, source_lang: str, target_lang: str,
                          context: Sequence[tuple[str, str]] = (),
                          terms: Sequence[tuple[str, str]] = ()) -> TranslationPrompt:
        """The stronger prompt for a final that came out as no translation: every example,
        fragments included (see ``FEW_SHOT_EXAMPLES``). The examples the first prompt
        leaves out come after the talk's context, so the retry's prompt starts as the
        first prompt does up to the source: a session's sequence caches that start, and
        the retry (a one-off generation that copies the longest cached prefix) decodes
        those examples and the source, not the context again (about 70 prompt rows
        instead of 190 on FLORES dev with two finals of context, ~3.5 ms a row on 2
        cores: retries 1.3-1.5x faster, ``livetrans bench retries``,
        reports/2026-12-08-retry-prefix/)."""
        if not self.late_retry_examples:
            every = replace(self, n_examples=len(FEW_SHOT_EXAMPLES[source_lang]))
            return every.translation(source, source_lang, target_lang, context, terms)
        late = list(zip(FEW_SHOT_EXAMPLES[source_lang][self.n_examples:],
                        FEW_SHOT_EXAMPLES[target_lang][self.n_examples:], strict=True))
        return self.translation(source, source_lang, target_lang, context, terms,
                                late_examples=late)
