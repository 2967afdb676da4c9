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


@pytest.mark.parametrize(("metadata", "template", "family"), [
    ({"general.name": "Translategemma 4b It", "general.basename": "translategemma",
      "general.architecture": "gemma3"}, "<start_of_turn>", "translategemma"),
    ({"general.name": "translategemma-12b-it"}, "", "translategemma"),
    ({"general.name": "some model"}, "{{ m['content'][0]['source_lang_code'] }}",
     "translategemma"),
    ({"general.name": "HY MT1.5 1.8B", "general.architecture": "hunyuan-dense"}, "", "hy-mt"),
    ({"general.name": "HY-MT1.5-7B"}, "", "hy-mt"),
    ({"general.name": "Hunyuan MT 7B", "general.architecture": "hunyuan-dense"}, "",
     "hunyuan-mt"),
    ({"general.basename": "Hunyuan-MT"}, "", "hunyuan-mt"),
])
def test_translation_tuned_families_from_their_names(metadata: dict, template: str,
                                                     family: str) -> None:
    assert detect_family(metadata, template) == family


def test_fixed_prompt_families() -> None:
    for name in ("translategemma", "hunyuan-mt", "hy-mt"):
        assert FAMILIES[name].fixed_prompt and not FAMILIES[name].system
    assert not FAMILIES["tower"].fixed_prompt and not FAMILIES["generic"].fixed_prompt
