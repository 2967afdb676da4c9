"""Instruction-model families: what a chat-template prompt adds for each.

The model's chat template stays the source of truth for the markup (``ChatTemplateFormat``
renders every turn through it). What a family changes is what goes *into* the turns and
when the answer ends, where a generic instruction is not enough:

* ``system``: the instruction as a system turn (a family whose template takes one) or at
  the head of the user turn (Gemma's templates have no system role: Gemma 2's refuses one,
  Gemma 3's folds it into the first user turn);
* ``stops``: the end-of-turn marker as text, for a GGUF whose end-of-generation token list
  misses it (the answer must never run into a second turn);
* ``shots``: example translations as earlier user / assistant turns (the prompts' own
  ``FEW_SHOT_EXAMPLES``): a 135M SmolLM2 answers "Translate ..." with framing and English
  often without them (docs/instruct-models.md has the measured effect);
* ``style``: what a user turn holds, the prompt each family's model card publishes:

  - ``instruction``: an English request (general instruction models);
  - ``tower``: Unbabel's Tower models are trained on "Translate the following text from
    English into German.\\nEnglish: ...\\nGerman:", their model card's prompt;
  - ``translategemma``: Google's TranslateGemma takes no request at all: its chat template
    writes the instruction itself from a structured user turn (one ``{"type": "text",
    "source_lang_code", "target_lang_code", "text"}`` item) and refuses a plain string;
  - ``hunyuan-mt`` / ``hy-mt``: Tencent's Hunyuan-MT-7B and HY-MT1.5 (1.8B, 7B) are
    trained on a fixed instruction, a Chinese one when Chinese is the source or the
    target, an English one otherwise (``fixed_request``).

The family is read from the model's metadata (``general.name``, ``general.basename``,
``general.organization``, ``general.architecture``) and the template's markers
(``detect_family``); ``--prompt-format chat-<family>`` forces one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """What a chat-template prompt adds for one family of instruction models."""

    name: str
    system: bool = True
    stops: tuple[str, ...] = ()
    shots: int = 0
    style: str = "instruction"

    @property
    def fixed_prompt(self) -> bool:
        """The model was trained on one published prompt, which takes nothing else: no
        added instruction, no glossary list (those go in as example turns instead)."""
        return self.style in ("translategemma", "hunyuan-mt", "hy-mt")


FAMILIES: dict[str, Family] = {
    # what the chat-template path did before families: the instruction in the user turn
    "generic": Family("generic", system=False),
    "gemma": Family("gemma", system=False, stops=("<end_of_turn>",)),
    "qwen": Family("qwen", stops=("<|im_end|>",)),
    "llama": Family("llama", stops=("<|eot_id|>", "<|end_of_text|>")),
    "tower": Family("tower", system=False, stops=("<|im_end|>",), style="tower"),
    "smollm": Family("smollm", stops=("<|im_end|>",), shots=2),
    # translation-tuned models whose published prompt is not a generic request; none of
    # them takes a system turn (TranslateGemma's template refuses one, Hunyuan's cards say
    # "our model does not have the default system_prompt")
    "translategemma": Family("translategemma", system=False, stops=("<end_of_turn>",),
                             style="translategemma"),
    "hunyuan-mt": Family("hunyuan-mt", system=False, style="hunyuan-mt"),
    "hy-mt": Family("hy-mt", system=False, style="hy-mt"),
}

# Target-language names in the Chinese instruction, from the Hunyuan-MT / HY-MT1.5 model
# cards' table of supported languages (its "Chinese Names" column)
HUNYUAN_CHINESE_NAMES = {
    "zh": "中文", "en": "英语", "fr": "法语", "pt": "葡萄牙语", "es": "西班牙语", "ja": "日语",
    "ru": "俄语", "it": "意大利语", "de": "德语", "uk": "乌克兰语",
}


def fixed_request(style: str, text: str, source_lang: str, target_lang: str,
                  target_name: str) -> str:
    """One user turn's content for Hunyuan-MT-7B (``hunyuan-mt``) or HY-MT1.5 (``hy-mt``):
    the instruction their model cards publish ("Prompt Template for ZH<=>XX Translation",
    "... for XX<=>XX Translation, excluding ZH<=>XX"), then the source. The two versions
    differ only in the Chinese instruction."""
    if "zh" in (source_lang, target_lang):
        name = HUNYUAN_CHINESE_NAMES[target_lang]
        if style == "hunyuan-mt":
            return f"把下面的文本翻译成{name}，不要额外解释。\n\n{text}"
        return f"将以下文本翻译为{name}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}"
    return (f"Translate the following segment into {target_name}, without additional "
            f"explanation.\n\n{text}")


# the few-shot examples a family's shots use: a whole sentence and a fragment
# (``app.translation.prompts.FEW_SHOT_EXAMPLES`` indices)
SHOT_EXAMPLES = (2, 3)


def _marker_family(template: str) -> str | None:
    if "source_lang_code" in template:  # TranslateGemma's structured user turn
        return "translategemma"
    if "<start_of_turn>" in template:
        return "gemma"
    if "<|start_header_id|>" in template:
        return "llama"
    return None


def detect_family(metadata: Mapping[str, str | None], template: str) -> str:
    """The family of a model from its GGUF metadata and chat template; ``generic`` when
    nothing names one. Names first (Tower is a Llama or a Qwen underneath, SmolLM2 a Llama
    with a ChatML template, TranslateGemma a Gemma 3), then the template's markers."""
    names = " ".join(str(metadata.get(k) or "") for k in (
        "general.name", "general.basename", "general.organization",
        "general.finetune")).casefold()
    # "Translategemma 4b It", "HY-MT1.5-1.8B", "Hunyuan MT 7B": names as converters write
    # them, with or without separators
    joined = re.sub(r"[\s_-]+", "", names)
    if "translategemma" in joined:
        return "translategemma"
    if "hymt1.5" in joined or "hymt15" in joined:
        return "hy-mt"
    if "hunyuanmt" in joined:
        return "hunyuan-mt"
    if "tower" in names or "unbabel" in names:
        return "tower"
    if "smollm" in names:
        return "smollm"
    if "qwen" in names:
        return "qwen"
    if "gemma" in names:
        return "gemma"
    if "llama" in names:
        return "llama"
    marked = _marker_family(template)
    if marked:
        return marked
    arch = str(metadata.get("general.architecture") or "").casefold()
    if arch.startswith("qwen"):
        return "qwen"
    if arch.startswith("gemma"):
        return "gemma"
    return "generic"


def family_named(name: str) -> Family:
    """The family ``--prompt-format chat-<name>`` names (``ValueError`` for another)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r} ({', '.join(FAMILIES)})")
    return FAMILIES[name]
