"""Glossary drafters on a toy tokenizer (one token per character): a begun term is completed
as the glossary spells it, whatever the model's own tokens were; a missing term is proposed
whole."""

from __future__ import annotations

from drafters.base import DraftContext
from drafters.glossary import GlossaryContinuation, GlossaryStart


def tokenize(text: str) -> list[int]:
    return [ord(ch) for ch in text]


def detokenize(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def ctx(text: str) -> DraftContext:
    return DraftContext(history=tokenize(text))


def test_a_begun_term_is_completed_from_where_the_output_stands() -> None:
    d = GlossaryContinuation(["Aufmerksamkeitsmechanismus", "Sprachmodell"], tokenize,
                             detokenize)
    assert detokenize(d.propose(ctx(" Die Aufmerksamkeit"), 99)) == "smechanismus"
    assert detokenize(d.propose(ctx(" Das sprachm"), 3)) == "ode"  # any case, cut at k
    assert d.propose(ctx(" Die Aufm"), 8) == tokenize("erksamke")


def test_no_proposal_mid_word_below_the_minimum_or_once_the_term_is_whole() -> None:
    d = GlossaryContinuation(["Modellierung"], tokenize, detokenize)
    assert d.propose(ctx(" Sprachmodell"), 8) == []  # "modell" does not start a word here
    assert d.propose(ctx(" Die Mod"), 8) == []  # three characters are no evidence
    assert d.propose(ctx(" Die Modellierung"), 8) == []
    assert d.propose(ctx(""), 8) == []


def test_the_longest_begun_term_wins() -> None:
    d = GlossaryContinuation(["Netz", "Netzwerkprotokoll", "Netzwerk"], tokenize, detokenize)
    assert detokenize(d.propose(ctx(" ein Netzwerkp"), 99)) == "rotokoll"


def test_a_missing_term_is_proposed_whole_until_it_is_out() -> None:
    d = GlossaryStart(["Korpus", "Sprachmodell"], tokenize, detokenize)
    assert detokenize(d.propose(ctx(" Wir"), 99)) == " Korpus"
    assert detokenize(d.propose(ctx(" Ein KORPUS und"), 99)) == " Sprachmodell"
    assert d.propose(ctx(" Korpus, Sprachmodell"), 99) == []


def test_terms_in_scripts_without_spaces_start_anywhere_and_need_no_space() -> None:
    d = GlossaryContinuation(["機械翻訳システム", "ニューラル機械翻訳"], tokenize, detokenize)
    # two characters of a Han or kana term, right after the particle before it
    assert detokenize(d.propose(ctx("私たちは機械"), 99)) == "翻訳システム"
    assert detokenize(d.propose(ctx("これはニュ"), 99)) == "ーラル機械翻訳"
    assert d.propose(ctx("これは機"), 99) == []  # one character is no evidence
    start = GlossaryStart(["機械翻訳", "Transformer"], tokenize, detokenize)
    assert detokenize(start.propose(ctx("これは"), 99)) == "機械翻訳"  # no space before it
    assert detokenize(start.propose(ctx("これは機械翻訳の"), 99)) == " Transformer"
