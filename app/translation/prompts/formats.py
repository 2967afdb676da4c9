"""Which prompt format a model gets (``choose_prompt_format``: from its chat template and
metadata, or forced), the formats' names, and the plain-chat transcript for a base model
without a template (``app.translation.prompts``).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.translation.families import (
    FAMILIES,
    detect_family,
    family_named,
)
from app.translation.prompts.chat import ChatTemplateFormat
from app.translation.prompts.few_shot import FewShotFormat
from app.translation.prompts.parts import PromptPart, TranslationPrompt, ours, user

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
