"""The chat-template format for instruction models: the request as user turns through
the model's own template (rendered sandboxed, with the user's text put back as data), the
family's system turn, example turns and stops, and the check that refuses a template that
cannot carry a prompt (``app.translation.prompts``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.translation.families import (
    FAMILIES,
    SHOT_EXAMPLES,
    Family,
    fixed_request,
)
from app.translation.prompts.examples import FEW_SHOT_EXAMPLES
from app.translation.prompts.languages import LANGUAGE_NAMES
from app.translation.prompts.parts import PromptPart, TranslationPrompt, clean_source, ours, user

_SLOT = "\x00livetrans-user-{}\x00"

# An instruction model's answer ends at a line break once it has begun
# (``GenerationRequest.answer_stops``; a lead-in line such as "Here is the translation:"
# does not count): a caption is one line, as its source is (``clean_source``), so what
# follows is commentary or a second answer ("\n\nIn German, the translation is: ...").
ANSWER_STOPS = ("\n",)


class ChatTemplateError(ValueError):
    """The model's chat template cannot carry a translation prompt."""


@dataclass(frozen=True)
class ChatTemplateFormat:
    """One user turn through the model's own chat template (instruction-tuned models).

    ``family`` (``app.translation.families``) says what goes into the turns: a system
    turn, example turns, the end-of-turn stop, the prompt its model card publishes
    (Tower's, TranslateGemma's structured turn, Hunyuan-MT's instruction). Answers are
    cleaned of the framing instruction models add (``TranslationPrompt.clean_framing``)."""

    template: str
    bos_token: str = ""
    eos_token: str = ""
    name: str = "chat-template"
    extra_stops: tuple[str, ...] = field(default=())
    family: Family = FAMILIES["generic"]

    def render_chat(self, messages: list[dict[str, Any]]) -> TranslationPrompt:
        """Render through the template with placeholders, then put the user text back as
        user parts: the template's own markup is ours, the message contents are data.

        A content is a string, or (TranslateGemma's structured turn) a list of items whose
        ``text`` is the data; an item's other fields (language codes) are ours."""
        slotted, texts = _with_slots(messages)
        text = self._render(slotted, generation_prompt=True)
        parts: list[PromptPart] = []
        for i, data in enumerate(texts):
            before, found, text = text.partition(_SLOT.format(i))
            if not found:  # the template dropped this message: keep the rest as ours
                text = before
                continue
            parts += [ours(before), user(data)]
        parts.append(ours(text))
        # The template writes the BOS itself when it wants one.
        return TranslationPrompt(parts=tuple(parts),
                                 stop_strings=self.extra_stops + self.family.stops,
                                 add_bos=False)

    def _render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        # what Hugging Face's renderer provides: a template's own refusal, in its words
        env.globals["raise_exception"] = _raise_exception
        return env.from_string(self.template).render(
            messages=messages, add_generation_prompt=generation_prompt,
            bos_token=self.bos_token, eos_token=self.eos_token)

    def check(self) -> None:
        """Refuse a template that cannot carry the prompt (``ChatTemplateError``): one
        that fails to render, drops the user turn, or opens no answer turn. Served, such
        a model would answer with the template's own text."""
        slot = _SLOT.format(0)
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": self._content(slot, "en", "de")}]
        if self.family.system:
            messages.insert(0, {"role": "system", "content": "-"})
        try:
            with_prompt = self._render(messages, generation_prompt=True)
            without = self._render(messages, generation_prompt=False)
        except Exception as exc:  # noqa: BLE001 - any template error is the same verdict
            raise ChatTemplateError(
                f"its chat template fails to render for the {self.family.name} family "
                f"({type(exc).__name__}: {_one_line(str(exc))})") from None
        if slot not in with_prompt:
            raise ChatTemplateError("its chat template drops the user turn")
        tail = with_prompt.rsplit(slot, 1)[1]
        opens_answer = with_prompt != without or re.search(
            r"(?i)(assistant|model)\W*$", tail.strip()) is not None
        if not opens_answer:
            raise ChatTemplateError("its chat template has no generation prompt "
                                    "(add_generation_prompt adds no answer turn)")

    def _content(self, text: str, source_lang: str, target_lang: str) -> str | list[dict]:
        """A user turn's content: the text, or TranslateGemma's structured item (its
        template writes the instruction from the language codes, and refuses a string)."""
        if self.family.style == "translategemma":
            return [{"type": "text", "source_lang_code": source_lang,
                     "target_lang_code": target_lang, "text": text}]
        return text

    def examples(self, source_lang: str, target_lang: str,
                 shots: int | None = None) -> list[tuple[str, str]]:
        """The example pairs the family's shots show (for the leakage detector);
        ``shots`` overrides the family's count (a retry's examples)."""
        count = self.family.shots if shots is None else shots
        return [(FEW_SHOT_EXAMPLES[source_lang][i], FEW_SHOT_EXAMPLES[target_lang][i])
                for i in SHOT_EXAMPLES[:count]]

    def shown_examples(self, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
        """Every example pair a prompt of this format may show, a fixed-prompt family's
        retry included: the pairs the leakage detector looks for."""
        return self.examples(source_lang, target_lang,
                             shots=max(self.family.shots, len(SHOT_EXAMPLES)))

    def retry_translation(self, source: str, source_lang: str, target_lang: str,
                          context: Sequence[tuple[str, str]] = (),
                          terms: Sequence[tuple[str, str]] = ()) -> TranslationPrompt:
        """The stronger prompt for a final that came out as no translation: a request that
        insists, or, for a family trained on one fixed prompt (which an added sentence
        would change), the example translations as earlier turns."""
        if self.family.fixed_prompt:
            return self.translation(source, source_lang, target_lang, context=context,
                                    terms=terms, shots=len(SHOT_EXAMPLES))
        return self.translation(
            source, source_lang, target_lang,
            insist=f" The text may be unfinished: translate what is there into "
                   f"{LANGUAGE_NAMES[target_lang]}; never repeat it in "
                   f"{LANGUAGE_NAMES[source_lang]}, never add a label, quotes or a note.",
            context=context, terms=terms)

    def _request(self, source: str, source_lang: str, target_lang: str, insist: str,
                 required: str = "") -> str | list[dict]:
        """One user turn's content: the request and the source (all of it data)."""
        src_name, tgt_name = LANGUAGE_NAMES[source_lang], LANGUAGE_NAMES[target_lang]
        text = clean_source(source)
        if self.family.style == "tower":
            return (f"Translate the following text from {src_name} into {tgt_name}."
                    f"{insist}\n{required}{src_name}: {text}\n{tgt_name}:")
        if self.family.style in ("hunyuan-mt", "hy-mt"):
            return fixed_request(self.family.style, text, source_lang, target_lang, tgt_name)
        if self.family.style == "translategemma":
            return self._content(text, source_lang, target_lang)
        return (f"Translate the following {src_name} text into {tgt_name}. Reply with the "
                f"translation only.{insist}\n\n{required}{text}")

    def translation(self, source: str, source_lang: str, target_lang: str,
                    insist: str = "", context: Sequence[tuple[str, str]] = (),
                    terms: Sequence[tuple[str, str]] = (),
                    shots: int | None = None) -> TranslationPrompt:
        """One user turn per source: the family's example turns, then the talk's previous
        finals (``context``) as earlier user / assistant turns, the glossary entries that
        apply (``terms``) as a list in the last turn. All of it is message content, which
        ``render_chat`` keeps as data.

        A family trained on one fixed prompt (``Family.fixed_prompt``) gets its terms as
        example turns before the context instead: its request takes nothing but the text,
        and a list written into the text would be translated as part of it."""
        src_name, tgt_name = LANGUAGE_NAMES[source_lang], LANGUAGE_NAMES[target_lang]
        messages: list[dict[str, Any]] = []
        if self.family.system:
            messages.append({"role": "system", "content": (
                f"You translate {src_name} into {tgt_name}. You reply with the {tgt_name} "
                f"translation only: no label, no quotes, no notes, no explanation.")})
        fixed = self.family.fixed_prompt
        pairs = self.examples(source_lang, target_lang, shots)
        if fixed:
            pairs += list(terms)
        for src, tgt in [*pairs, *context]:
            messages += [{"role": "user",
                          "content": self._request(src, source_lang, target_lang, insist)},
                         {"role": "assistant", "content": clean_source(tgt)}]
        required = ""
        if terms and not fixed:
            required = "Use these terms: " + "; ".join(
                f"{clean_source(s)} = {clean_source(t)}" for s, t in terms) + "\n\n"
        messages.append({"role": "user", "content": self._request(
            source, source_lang, target_lang, insist, required)})
        rendered = self.render_chat(messages)
        return TranslationPrompt(parts=rendered.parts, source=clean_source(source),
                                 stop_strings=rendered.stop_strings, add_bos=False,
                                 answer_stops=ANSWER_STOPS, clean_framing=True)


def _raise_exception(message: str) -> None:
    raise ValueError(message)


def _with_slots(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``messages`` with each data text (a string content, or an item's ``text`` in a
    list content) replaced by a numbered placeholder, and the texts in that order."""
    texts: list[str] = []

    def slot(text: str) -> str:
        texts.append(text)
        return _SLOT.format(len(texts) - 1)

    slotted = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            content = slot(content)
        else:
            content = [{**item, "text": slot(item["text"])} if "text" in item else item
                       for item in content]
        slotted.append({**m, "content": content})
    return slotted, texts


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
