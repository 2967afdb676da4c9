"""``app.translation.glossary``: what a client may send, which entries apply, what a translation
missed."""

from __future__ import annotations

import pytest

from app.translation.glossary import (
    MAX_ENTRIES,
    MAX_TERM_CHARS,
    GlossaryError,
    Term,
    applicable,
    check_glossary,
    contains_term,
    missed,
    with_target_terms,
)


def test_a_valid_glossary_is_kept_with_its_spacing_normalised() -> None:
    assert check_glossary({"machine  translation": " maschinelle Übersetzung "}) == {
        "machine translation": "maschinelle Übersetzung"}
    assert check_glossary({}) == {}


@pytest.mark.parametrize("value, says", [
    (["a", "b"], "an object"),
    ({"a": 1}, "target term must be a string"),
    ({"": "x"}, "source term is empty"),
    ({"a": "  "}, "target term is empty"),
    ({"a": "x" * (MAX_TERM_CHARS + 1)}, f"limit is {MAX_TERM_CHARS}"),
    ({"a\nb": "x"}, "control character"),
    ({"a": "x\x00"}, "control character"),
    ({"GPU": "Grafikkarte", "gpu": "GPU"}, "repeats entry 1"),
    ({f"t{i}": "x" for i in range(MAX_ENTRIES + 1)}, f"limit is {MAX_ENTRIES}"),
])
def test_bad_glossaries_are_refused_naming_the_entry(value, says) -> None:
    with pytest.raises(GlossaryError, match=says):
        check_glossary(value)


def test_entries_apply_on_word_boundaries_in_any_case_longest_first() -> None:
    glossary = {"API": "Schnittstelle", "translation": "Übersetzung",
                "machine translation": "maschinelle Übersetzung", "C++": "C++",
                "Node.js": "Node.js"}
    found = applicable(glossary, "Rapid machine   Translation with an api in C++.")
    assert [t.source for t in found] == ["machine translation", "translation", "API", "C++"]
    assert applicable(glossary, "rapid apis and node.js") == [Term("Node.js", "Node.js")]
    assert applicable(None, "anything") == []


def test_terms_in_scripts_without_spaces_apply_inside_the_sentence() -> None:
    glossary = {"機械翻訳": "machine translation", "语言模型": "language model",
                "기계번역": "machine translation", "การแปล": "translation"}
    assert applicable(glossary, "私は機械翻訳が好きです") == [
        Term("機械翻訳", "machine translation")]
    assert applicable(glossary, "大语言模型很有用") == [Term("语言模型", "language model")]
    assert applicable(glossary, "기계번역은 어렵다") == [Term("기계번역", "machine translation")]
    assert applicable(glossary, "ระบบการแปลภาษา") == [Term("การแปล", "translation")]
    # a Latin term keeps its boundaries next to such text too
    assert applicable({"AI": "KI"}, "PAIN") == [] and applicable({"AI": "KI"}, "AIは") == [
        Term("AI", "KI")]


def test_a_target_term_counts_in_any_case_spacing_and_inside_compounds() -> None:
    assert contains_term("Das neue  Sprachmodell", "sprachmodell")
    assert contains_term("maschinelle\nÜbersetzung", "maschinelle Übersetzung")
    terms = [Term("model", "Modell"), Term("corpus", "Korpus")]
    assert missed(terms, "Ein Sprachmodell auf einem Textkorpus") == []
    assert missed(terms, "Ein Modell auf Daten") == ["corpus"]


def test_the_repair_source_carries_the_missing_target_terms() -> None:
    terms = [Term("borrowing", "Entlehnung"), Term("borrowings", "Entlehnungen"),
             Term("model", r"\1 Modell")]
    source = "Lexical borrowing and Borrowings; the model, not a remodel."
    assert with_target_terms(source, terms, ["borrowing", "borrowings", "model"]) == \
        r"Lexical Entlehnung and Entlehnungen; the \1 Modell, not a remodel."
    assert with_target_terms(source, terms, ["model"]) == \
        r"Lexical borrowing and Borrowings; the \1 Modell, not a remodel."
    assert with_target_terms(source, terms, []) == source
