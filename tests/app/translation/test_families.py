"""Instruction-model families from a GGUF's metadata and template."""

import pytest

from app.translation.families import FAMILIES, detect_family, family_named

CHATML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n" \
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"


@pytest.mark.parametrize(("metadata", "template", "family"), [
    ({"general.name": "Smollm2 135M 8k Lc100K Mix1 Ep2", "general.basename": "smollm2",
      "general.architecture": "llama"}, CHATML, "smollm"),
    ({"general.name": "Qwen2.5 0.5B Instruct", "general.architecture": "qwen2"}, CHATML,
     "qwen"),
    ({"general.name": "TowerInstruct 7B v0.2", "general.architecture": "llama"}, CHATML,
     "tower"),
    ({"general.name": "Tower Plus 2B", "general.organization": "Unbabel",
      "general.architecture": "gemma2"}, "<start_of_turn>", "tower"),
    ({"general.name": "Gemma 3 1b It", "general.architecture": "gemma3"}, "<start_of_turn>",
     "gemma"),
    ({"general.name": "Llama 3.2 1B Instruct", "general.architecture": "llama"},
     "<|start_header_id|>", "llama"),
    ({"general.name": "some model"}, "<start_of_turn>", "gemma"),
    ({"general.name": "some model"}, "<|start_header_id|>", "llama"),
    ({"general.architecture": "qwen3"}, CHATML, "qwen"),
    ({}, CHATML, "generic"),
])
def test_family_from_metadata_then_template(metadata: dict, template: str,
                                            family: str) -> None:
    assert detect_family(metadata, template) == family


def test_families_by_name() -> None:
    assert family_named("gemma") is FAMILIES["gemma"]
    assert not FAMILIES["gemma"].system  # Gemma templates have no system role
    assert FAMILIES["smollm"].shots > 0
    with pytest.raises(ValueError, match="unknown model family"):
        family_named("mistral")
