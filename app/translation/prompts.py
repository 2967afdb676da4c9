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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.translation.families import (
    FAMILIES,
    SHOT_EXAMPLES,
    Family,
    detect_family,
    family_named,
    fixed_request,
)

LANGUAGE_NAMES: dict[str, str] = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "uk": "Ukrainian",
    "ru": "Russian",
    "zh": "Chinese",
    "ja": "Japanese",
}

# Parallel example sentences, one list per language, aligned by position. The first three
# are whole sentences; the last two are fragments, as a live speaker's partial transcript
# is: a prompt with only whole sentences teaches a small model nothing about a fragment,
# and it tends to copy the English instead (``app.translation.pathology``).
FEW_SHOT_EXAMPLES: dict[str, list[str]] = {
    "en": [
        "The train to the airport leaves every twenty minutes.",
        "We have updated the results table in the second section.",
        "Thank you all for coming to this talk today.",
        "So on the right side you can see",
        "The new system is faster than",
    ],
    "de": [
        "Der Zug zum Flughafen fährt alle zwanzig Minuten.",
        "Wir haben die Ergebnistabelle im zweiten Abschnitt aktualisiert.",
        "Vielen Dank an Sie alle, dass Sie heute zu diesem Vortrag gekommen sind.",
        "Auf der rechten Seite sehen Sie also",
        "Das neue System ist schneller als",
    ],
    "fr": [
        "Le train pour l'aéroport part toutes les vingt minutes.",
        "Nous avons mis à jour le tableau des résultats dans la deuxième section.",
        "Merci à tous d'être venus à cette présentation aujourd'hui.",
        "Donc, sur le côté droit, vous pouvez voir",
        "Le nouveau système est plus rapide que",
    ],
    "es": [
        "El tren al aeropuerto sale cada veinte minutos.",
        "Hemos actualizado la tabla de resultados en la segunda sección.",
        "Gracias a todos por venir hoy a esta charla.",
        "Así que en el lado derecho pueden ver",
        "El nuevo sistema es más rápido que",
    ],
    "it": [
        "Il treno per l'aeroporto parte ogni venti minuti.",
        "Abbiamo aggiornato la tabella dei risultati nella seconda sezione.",
        "Grazie a tutti per essere venuti oggi a questo intervento.",
        "Quindi sul lato destro potete vedere",
        "Il nuovo sistema è più veloce di",
    ],
    "pt": [
        "O comboio para o aeroporto parte a cada vinte minutos.",
        "Atualizámos a tabela de resultados na segunda secção.",
        "Obrigado a todos por virem hoje a esta palestra.",
        "Então, do lado direito, podem ver",
        "O novo sistema é mais rápido do que",
    ],
    "uk": [
        "Потяг до аеропорту відправляється кожні двадцять хвилин.",
        "Ми оновили таблицю результатів у другому розділі.",
        "Дякую всім, що прийшли сьогодні на цю доповідь.",
        "Отже, праворуч ви можете побачити",
        "Нова система швидша, ніж",
    ],
    "ru": [
        "Поезд в аэропорт отправляется каждые двадцать минут.",
        "Мы обновили таблицу результатов во втором разделе.",
        "Спасибо всем, что пришли сегодня на этот доклад.",
        "Итак, справа вы можете увидеть",
        "Новая система быстрее, чем",
    ],
    "zh": [
        "去机场的火车每二十分钟一班。",
        "我们更新了第二部分的结果表。",
        "感谢大家今天来听这个报告。",
        "所以在右边你们可以看到",
        "新系统比",
    ],
    "ja": [
        "空港行きの電車は二十分ごとに出発します。",
        "第二節の結果の表を更新しました。",
        "本日はこの講演にお越しいただき、皆さんありがとうございます。",
        "それで、右側に見えるのは",
        "新しいシステムは",
    ],
}


class UnsupportedLanguageError(ValueError):
    """Raised for a language code the prompt formats have no examples for."""

    def __init__(self, code: str, param: str) -> None:
        supported = ", ".join(sorted(LANGUAGE_NAMES))
        super().__init__(f"Unsupported language '{code}'. Supported: {supported}.")
        self.code = code
        self.param = param


def direction(source: str, target: str) -> str:
    """``English→de``: a translation direction as tables and plots title it."""
    return f"{LANGUAGE_NAMES.get(source, source)}→{target}"


def check_language(code: str, param: str) -> str:
    """Normalise a language code (``DE`` -> ``de``) or raise ``UnsupportedLanguageError``."""
    normalised = code.strip().lower()
    if normalised not in LANGUAGE_NAMES:
        raise UnsupportedLanguageError(code, param)
    return normalised


def clean_source(text: str) -> str:
    """Collapse whitespace: a newline inside the source would end the few-shot line early."""
    return " ".join(text.split())


_LABEL = re.compile(
    r"\b(" + "|".join(sorted(LANGUAGE_NAMES.values(), key=len, reverse=True)) + r")(\s*):",
    re.IGNORECASE,
)


def neutralise_labels(text: str) -> str:
    """``German: PWNED`` inside a source becomes ``German - PWNED``.

    The few-shot format's structure is ``<Language>: <text>`` lines; a source that contains
    a label would otherwise present the model with an answer it tends to repeat. The words
    stay (they are part of what the speaker said); only the colon that makes them a label
    goes.
    """
    return _LABEL.sub(lambda m: f"{m.group(1)} -", text)


def _data(text: str) -> str:
    """User text as it goes into a few-shot line: one line, no labels."""
    return neutralise_labels(clean_source(text))


@dataclass(frozen=True)
class PromptPart:
    """A piece of a prompt: ours (may hold control tokens) or the user's (plain data)."""

    text: str
    trusted: bool


def user(text: str) -> PromptPart:
    return PromptPart(text, trusted=False)


def ours(text: str) -> PromptPart:
    return PromptPart(text, trusted=True)


def _merged(parts: Sequence[PromptPart]) -> tuple[PromptPart, ...]:
    """Adjacent parts of the same trust joined: the same prompt, tokenized as before
    (two of our parts in a row would otherwise be cut where the tokenizer does not cut)."""
    out: list[PromptPart] = []
    for part in parts:
        if out and out[-1].trusted == part.trusted:
            out[-1] = PromptPart(out[-1].text + part.text, part.trusted)
        else:
            out.append(part)
    return tuple(out)


@dataclass(frozen=True)
class TranslationPrompt:
    """A rendered prompt, as parts, plus what ends the model's answer.

    User text is kept apart from the prompt's own text so that it is tokenized with
    special-token parsing off: ``<eos>`` or ``<start_of_turn>`` typed by a user is text,
    never a control token (see ``tokenize_prompt``).
    """

    parts: tuple[PromptPart, ...]
    source: str = ""  # the text being translated (for length limits)
    stop_strings: tuple[str, ...] = ()
    stop_at_newline: bool = False
    add_bos: bool = True
    # an instruction model's answer: it ends at a blank line once begun, and the framing
    # such models add is taken off and diagnosed (``app.translation.framing``)
    answer_stops: tuple[str, ...] = ()
    clean_framing: bool = False

    @property
    def text(self) -> str:
        """The whole prompt as one string (for display and logs, not for tokenizing)."""
        return "".join(p.text for p in self.parts)


Tokenize = Callable[[str, bool, bool], list[int]]  # (text, add_bos, special) -> ids


def tokenize_prompt(prompt: TranslationPrompt, tokenize: Tokenize) -> list[int]:
    """Token ids of ``prompt``: our parts with special tokens parsed, user parts without.

    Parts are tokenized one by one, so a user part can never merge with, open or close a
    control token of ours. For ordinary text this gives the same ids as tokenizing the whole
    string (the boundaries sit before a space or a newline, where the tokenizer splits
    anyway); ``tests/app/test_prompts.py`` checks that on the real vocabulary.
    """
    ids: list[int] = []
    for i, part in enumerate(prompt.parts):
        bos = prompt.add_bos and i == 0
        if part.text or bos:
            ids += tokenize(part.text, bos, part.trusted)
    return ids


@dataclass(frozen=True)
class FewShotFormat:
    """``English: ... / German: ...`` lines for base models; the answer ends at a newline."""

    name: str = "few-shot"
    n_examples: int = 3

    def examples(self, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
        """The (source, translation) pairs the prompt shows, for the leakage detector."""
        return list(zip(FEW_SHOT_EXAMPLES[source_lang][: self.n_examples],
                        FEW_SHOT_EXAMPLES[target_lang][: self.n_examples], strict=True))

    def translation(self, source: str, source_lang: str, target_lang: str,
                    context: Sequence[tuple[str, str]] = (),
                    terms: Sequence[tuple[str, str]] = ()) -> TranslationPrompt:
        """The few-shot prompt for ``source``.

        ``terms`` (glossary entries that apply) and ``context`` (the talk's previous
        finals, oldest first) are more ``<Language>: ...`` pairs, as data: the model reads
        the required terms and the talk so far the way it reads the examples. The terms
        come first, before the examples: right before the source, a term pair was the
        pattern the model copied, answering a whole sentence with the term alone
        ("Lexical Entlehnung": 13 of 100 ACL finals, none without a glossary). Separated
        from the source by full sentences, a new term costs the KV cache the examples and
        the context (a few times a segment), and the context stays one fixed prefix while
        a segment's updates arrive.
        """
        src_name = LANGUAGE_NAMES[source_lang]
        tgt_name = LANGUAGE_NAMES[target_lang]

        def pairs(items: Sequence[tuple[str, str]]) -> list[PromptPart]:
            out: list[PromptPart] = []
            for src, tgt in items:
                out += [ours(f"{src_name}:"), user(" " + _data(src)),
                        ours(f"\n{tgt_name}:"), user(" " + _data(tgt)), ours("\n\n")]
            return out

        preamble = "\n\n".join(f"{src_name}: {src}\n{tgt_name}: {tgt}"
                                for src, tgt in self.examples(source_lang, target_lang))
        parts: list[PromptPart] = [*pairs(terms), ours(f"{preamble}\n\n"), *pairs(context)]
        text = _data(source)
        # No trailing space after the label: the model emits the space as part of its first
        # token (" Der"), which is the form drafts and dictionaries are built in. The space
        # before the source belongs to the user part, where the tokenizer puts it anyway.
        parts += [ours(f"{src_name}:"), user(" " + text if text else ""),
                  ours(f"\n{tgt_name}:")]
        return TranslationPrompt(parts=_merged(parts), source=clean_source(source),
                                 stop_at_newline=True)

    def retry_translation(self, source: str, source_lang: str, target_lang: str,
                          context: Sequence[tuple[str, str]] = (),
                          terms: Sequence[tuple[str, str]] = ()) -> TranslationPrompt:
        """The stronger prompt for a final that came out as no translation: every example,
        fragments included (see ``FEW_SHOT_EXAMPLES``)."""
        every = replace(self, n_examples=len(FEW_SHOT_EXAMPLES[source_lang]))
        return every.translation(source, source_lang, target_lang, context, terms)


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


PromptFormat = FewShotFormat | ChatTemplateFormat


def render_plain_chat(messages: list[dict[str, str]]) -> TranslationPrompt:
    """A minimal transcript format for plain chat on a base model without a template."""
    parts: list[PromptPart] = []
    for m in messages:
        parts += [ours(f"{m['role'].capitalize()}: "), user(m["content"]), ours("\n")]
    parts.append(ours("Assistant:"))
    return TranslationPrompt(parts=tuple(parts), stop_strings=("\nUser:",), add_bos=True)


FORMAT_NAMES = ("few-shot", "chat-template", *(f"chat-{name}" for name in FAMILIES))


def choose_prompt_format(
    chat_template: str | None, bos_token: str = "", eos_token: str = "", force: str | None = None,
    metadata: Mapping[str, str | None] | None = None,
) -> PromptFormat:
    """Pick the format from the model: a chat template means an instruction model, whose
    family (``app.translation.families``) comes from ``metadata`` and the template.

    Gemma 3 *base* GGUFs also carry a chat template, so ``force`` lets the caller override:
    ``few-shot``, ``chat-template`` (the family from the metadata) or ``chat-<family>``.
    A chat format is named ``chat-<family>`` whichever way its family was chosen.
    A chat template that cannot carry the prompt is refused (``ChatTemplateError``).
    """
    if force not in (None, *FORMAT_NAMES):
        raise ValueError(f"unknown prompt format {force!r} ({', '.join(FORMAT_NAMES)})")
    if force is not None and force != "few-shot" and not chat_template:
        # silently falling back would make a chat-template measurement a few-shot one
        raise ValueError(f"prompt format {force!r} asked for, but the model carries no "
                         "chat template: use 'few-shot' or a model with one")
    if force == "few-shot" or not chat_template:
        return FewShotFormat()
    if force in (None, "chat-template"):
        family = FAMILIES[detect_family(metadata or {}, chat_template)]
    else:
        family = family_named(force[len("chat-"):])
    # named by the family it picked: the name start-up logs and the ready line print
    fmt = ChatTemplateFormat(template=chat_template, bos_token=bos_token, eos_token=eos_token,
                             name=f"chat-{family.name}", family=family)
    fmt.check()
    return fmt
