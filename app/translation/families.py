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
* ``style``: ``instruction`` (an English request) or ``tower`` (Unbabel's Tower models are
  trained on "Translate the following text from English into German.\\nEnglish: ...
  \\nGerman:", their model card's prompt).

The family is read from the model's metadata (``general.name``, ``general.basename``,
``general.organization``, ``general.architecture``) and the template's markers
(``detect_family``); ``--prompt-format chat-<family>`` forces one.
"""

from __future__ import annotations

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


FAMILIES: dict[str, Family] = {
    # what the chat-template path did before families: the instruction in the user turn
    "generic": Family("generic", system=False),
    "gemma": Family("gemma", system=False, stops=("<end_of_turn>",)),
    "qwen": Family("qwen", stops=("<|im_end|>",)),
    "llama": Family("llama", stops=("<|eot_id|>", "<|end_of_text|>")),
    "tower": Family("tower", system=False, stops=("<|im_end|>",), style="tower"),
    "smollm": Family("smollm", stops=("<|im_end|>",), shots=2),
}

# the few-shot examples a family's shots use: a whole sentence and a fragment
# (``app.translation.prompts.FEW_SHOT_EXAMPLES`` indices)
SHOT_EXAMPLES = (2, 3)


def _marker_family(template: str) -> str | None:
    if "<start_of_turn>" in template:
        return "gemma"
    if "<|start_header_id|>" in template:
        return "llama"
    return None


def detect_family(metadata: Mapping[str, str | None], template: str) -> str:
    """The family of a model from its GGUF metadata and chat template; ``generic`` when
    nothing names one. Names first (Tower is a Llama or a Qwen underneath, SmolLM2 a Llama
    with a ChatML template), then the template's markers."""
    names = " ".join(str(metadata.get(k) or "") for k in (
        "general.name", "general.basename", "general.organization",
        "general.finetune")).casefold()
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
