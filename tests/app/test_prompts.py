import pytest

from app.prompts import (
    FEW_SHOT_EXAMPLES,
    LANGUAGE_NAMES,
    FewShotFormat,
    UnsupportedLanguageError,
    check_language,
    choose_prompt_format,
)


def test_every_language_has_aligned_examples() -> None:
    sizes = {len(v) for v in FEW_SHOT_EXAMPLES.values()}
    assert sizes == {3} and set(FEW_SHOT_EXAMPLES) == set(LANGUAGE_NAMES)


def test_few_shot_prompt_ends_with_the_target_label() -> None:
    prompt = FewShotFormat().translation("Hello\nworld", "en", "de")
    assert prompt.text.endswith("English: Hello world\nGerman:")
    assert prompt.stop_at_newline


def test_language_check() -> None:
    assert check_language("DE", "target_lang") == "de"
    with pytest.raises(UnsupportedLanguageError):
        check_language("xx", "target_lang")


def test_format_choice() -> None:
    assert choose_prompt_format(None).name == "few-shot"
    assert choose_prompt_format("{{ messages }}").name == "chat-template"
    assert choose_prompt_format("{{ messages }}", force="few-shot").name == "few-shot"
