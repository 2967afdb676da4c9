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

from dataclasses import dataclass, field

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

# Parallel example sentences, one list per language, aligned by position.
FEW_SHOT_EXAMPLES: dict[str, list[str]] = {
    "en": [
        "The train to the airport leaves every twenty minutes.",
        "We have updated the results table in the second section.",
        "Thank you all for coming to this talk today.",
    ],
    "de": [
        "Der Zug zum Flughafen fährt alle zwanzig Minuten.",
        "Wir haben die Ergebnistabelle im zweiten Abschnitt aktualisiert.",
        "Vielen Dank an Sie alle, dass Sie heute zu diesem Vortrag gekommen sind.",
    ],
    "fr": [
        "Le train pour l'aéroport part toutes les vingt minutes.",
        "Nous avons mis à jour le tableau des résultats dans la deuxième section.",
        "Merci à tous d'être venus à cette présentation aujourd'hui.",
    ],
    "es": [
        "El tren al aeropuerto sale cada veinte minutos.",
        "Hemos actualizado la tabla de resultados en la segunda sección.",
        "Gracias a todos por venir hoy a esta charla.",
    ],
    "it": [
        "Il treno per l'aeroporto parte ogni venti minuti.",
        "Abbiamo aggiornato la tabella dei risultati nella seconda sezione.",
        "Grazie a tutti per essere venuti oggi a questo intervento.",
    ],
    "pt": [
        "O comboio para o aeroporto parte a cada vinte minutos.",
        "Atualizámos a tabela de resultados na segunda secção.",
        "Obrigado a todos por virem hoje a esta palestra.",
    ],
    "uk": [
        "Потяг до аеропорту відправляється кожні двадцять хвилин.",
        "Ми оновили таблицю результатів у другому розділі.",
        "Дякую всім, що прийшли сьогодні на цю доповідь.",
    ],
    "ru": [
        "Поезд в аэропорт отправляется каждые двадцать минут.",
        "Мы обновили таблицу результатов во втором разделе.",
        "Спасибо всем, что пришли сегодня на этот доклад.",
    ],
    "zh": [
        "去机场的火车每二十分钟一班。",
        "我们更新了第二部分的结果表。",
        "感谢大家今天来听这个报告。",
    ],
    "ja": [
        "空港行きの電車は二十分ごとに出発します。",
        "第二節の結果の表を更新しました。",
        "本日はこの講演にお越しいただき、皆さんありがとうございます。",
    ],
}


class UnsupportedLanguageError(ValueError):
    """Raised for a language code the prompt formats have no examples for."""

    def __init__(self, code: str, param: str) -> None:
        supported = ", ".join(sorted(LANGUAGE_NAMES))
        super().__init__(f"Unsupported language '{code}'. Supported: {supported}.")
        self.code = code
        self.param = param


def check_language(code: str, param: str) -> str:
    """Normalise a language code (``DE`` -> ``de``) or raise ``UnsupportedLanguageError``."""
    normalised = code.strip().lower()
    if normalised not in LANGUAGE_NAMES:
        raise UnsupportedLanguageError(code, param)
    return normalised


def clean_source(text: str) -> str:
    """Collapse whitespace: a newline inside the source would end the few-shot line early."""
    return " ".join(text.split())


@dataclass(frozen=True)
class TranslationPrompt:
    """A rendered prompt plus what ends the model's answer."""

    text: str
    source: str = ""  # the text being translated (for length limits)
    stop_strings: tuple[str, ...] = ()
    stop_at_newline: bool = False
    add_bos: bool = True


@dataclass(frozen=True)
class FewShotFormat:
    """``English: ... / German: ...`` lines for base models; the answer ends at a newline."""

    name: str = "few-shot"
    n_examples: int = 3

    def translation(self, source: str, source_lang: str, target_lang: str) -> TranslationPrompt:
        src_name = LANGUAGE_NAMES[source_lang]
        tgt_name = LANGUAGE_NAMES[target_lang]
        blocks = [
            f"{src_name}: {src}\n{tgt_name}: {tgt}"
            for src, tgt in zip(
                FEW_SHOT_EXAMPLES[source_lang][: self.n_examples],
                FEW_SHOT_EXAMPLES[target_lang][: self.n_examples],
                strict=True,
            )
        ]
        # No trailing space after the label: the model emits the space as part of its first
        # token (" Der"), which is the form drafts and dictionaries are built in.
        blocks.append(f"{src_name}: {clean_source(source)}\n{tgt_name}:")
        return TranslationPrompt(text="\n\n".join(blocks), source=clean_source(source),
                                 stop_at_newline=True)


@dataclass(frozen=True)
class ChatTemplateFormat:
    """One user turn through the model's own chat template (instruction-tuned models)."""

    template: str
    bos_token: str = ""
    eos_token: str = ""
    name: str = "chat-template"
    extra_stops: tuple[str, ...] = field(default=())

    def render_chat(self, messages: list[dict[str, str]]) -> TranslationPrompt:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        text = env.from_string(self.template).render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        # The template writes the BOS itself when it wants one.
        return TranslationPrompt(text=text, stop_strings=self.extra_stops, add_bos=False)

    def translation(self, source: str, source_lang: str, target_lang: str) -> TranslationPrompt:
        instruction = (
            f"Translate the following {LANGUAGE_NAMES[source_lang]} text into "
            f"{LANGUAGE_NAMES[target_lang]}. Reply with the translation only.\n\n"
            f"{clean_source(source)}"
        )
        rendered = self.render_chat([{"role": "user", "content": instruction}])
        return TranslationPrompt(text=rendered.text, source=clean_source(source),
                                 stop_strings=rendered.stop_strings, add_bos=False)


PromptFormat = FewShotFormat | ChatTemplateFormat


def render_plain_chat(messages: list[dict[str, str]]) -> TranslationPrompt:
    """A minimal transcript format for plain chat on a base model without a template."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    lines.append("Assistant:")
    return TranslationPrompt(text="\n".join(lines), stop_strings=("\nUser:",), add_bos=True)


def choose_prompt_format(
    chat_template: str | None, bos_token: str = "", eos_token: str = "", force: str | None = None
) -> PromptFormat:
    """Pick the format from the model: a chat template means an instruction model.

    Gemma 3 *base* GGUFs also carry a chat template, so ``force`` lets the caller override;
    the engine forces few-shot for models whose name says they are base models.
    """
    if force == "few-shot" or not chat_template:
        return FewShotFormat()
    if force not in (None, "chat-template"):
        raise ValueError(f"unknown prompt format {force!r}")
    return ChatTemplateFormat(template=chat_template, bos_token=bos_token, eos_token=eos_token)
