"""Framing an instruction model adds round a translation: taken off, found, held back."""

import pytest

from app.translation.framing import (
    StreamCleaner,
    clean_framing,
    cut_framing,
    find_framing,
    held_back,
)

SOURCE = "Good morning, everyone."
DE = "Guten Morgen zusammen."

# (raw answer, what the caption holds, kinds taken off): many phrasings, several languages
CLEANED = [
    # the caption: a second paragraph with a label and an open quote
    ('Wir können können, wir können.\n\nIn German, the translation is: "Wir k',
     "Wir können können, wir können.", {"commentary"}),
    (f"Translation: {DE}", DE, {"label"}),
    (f"Here is the translation:\n{DE}", DE, {"label"}),
    (f"Here is the German translation\n{DE}", DE, {"label"}),
    (f"Die Übersetzung ins Deutsche\n\n{DE}", DE, {"label"}),
    (f"Here is the translation:\n\n{DE}\n\nI hope this helps!", DE, {"label", "commentary"}),
    (f'Here is the German translation: "{DE}"', DE, {"label", "quotes"}),
    (f"Here's the translation in German: {DE}", DE, {"label"}),
    (f"Sure! Here is the translation: {DE}", DE, {"label"}),
    (f"Here it is: {DE}", DE, {"label"}),
    (f"Sure, here you go: {DE}", DE, {"label"}),
    (f"Sure! {DE}", DE, {"label"}),
    (f"Certainly!\n{DE}", DE, {"label"}),
    (f"German: {DE}", DE, {"label"}),
    (f"**German:** {DE}", DE, {"label"}),
    (f"Deutsch: {DE}", DE, {"label"}),
    (f"In German: {DE}", DE, {"label"}),
    (f"German translation: {DE}", DE, {"label"}),
    (f"Hier ist die Übersetzung: {DE}", DE, {"label"}),
    (f"Übersetzung ins Deutsche: {DE}", DE, {"label"}),
    (f"Die Übersetzung lautet: „{DE}“", DE, {"label", "quotes"}),
    ("Voici la traduction : Bonjour à tous.", "Bonjour à tous.", {"label"}),
    ("Traduction en français : « Bonjour à tous. »", "Bonjour à tous.", {"label", "quotes"}),
    ("Traducción al español: Buenos días a todos.", "Buenos días a todos.", {"label"}),
    ("Aquí está la traducción: Buenos días a todos.", "Buenos días a todos.", {"label"}),
    ("Ecco la traduzione: Buongiorno a tutti.", "Buongiorno a tutti.", {"label"}),
    ("Tradução: Bom dia a todos.", "Bom dia a todos.", {"label"}),
    ("Перевод: Доброе утро всем.", "Доброе утро всем.", {"label"}),
    ("Вот перевод: «Доброе утро всем.»", "Доброе утро всем.", {"label", "quotes"}),
    ("Переклад: Доброго ранку всім.", "Доброго ранку всім.", {"label"}),
    ("翻译：大家早上好。", "大家早上好。", {"label"}),
    ("以下は翻訳です：皆さん、おはようございます。", "皆さん、おはようございます。", {"label"}),
    # quotes of every kind round the whole answer
    (f'"{DE}"', DE, {"quotes"}),
    (f'"{DE[:-1]}".', DE, {"quotes"}),
    (f"“{DE}”", DE, {"quotes"}),
    (f"„{DE}“", DE, {"quotes"}),
    (f"»{DE}«", DE, {"quotes"}),
    ("« Bonjour à tous. »", "Bonjour à tous.", {"quotes"}),
    ("「皆さん、おはようございます。」", "皆さん、おはようございます。", {"quotes"}),
    ("『大家早上好。』", "大家早上好。", {"quotes"}),
    ('"Guten Morgen', "Guten Morgen", {"quotes"}),  # opened, cut off
    # notes and commentary after the translation
    (f"{DE} (Note: this is informal)", DE, {"commentary"}),
    (f"{DE[:-1]} (oder: Guten Morgen allerseits).", DE, {"commentary"}),
    (f"{DE} [Literally: good morning together]", DE, {"commentary"}),
    (f"{DE} (Anmerkung: informell)", DE, {"commentary"}),
    (f'{DE}\nNote: formal would be "Guten Morgen allerseits".', DE, {"commentary"}),
    (f"{DE} This translation is informal.", DE, {"commentary"}),
    (f"{DE} I hope this helps!", DE, {"commentary"}),
    (f"{DE} Die Übersetzung ist wörtlich.", DE, {"commentary"}),
    ("Bonjour à tous. Remarque : c'est informel.", "Bonjour à tous.", {"commentary"}),
    # the source restated before its translation
    (f"{SOURCE} = {DE}", DE, {"restated_source"}),
    (f'"{SOURCE}" -> "{DE}"', DE, {"restated_source", "quotes"}),
    (f"{SOURCE} → {DE}", DE, {"restated_source"}),
    (f'In German, "{SOURCE[:-1]}" is "{DE[:-1]}".', DE, {"label", "quotes"}),
    (f'The translation of "{SOURCE[:-1]}" in German is "{DE[:-1]}".', DE, {"label", "quotes"}),
]


@pytest.mark.parametrize(("raw", "caption", "kinds"), CLEANED)
def test_framing_is_taken_off(raw: str, caption: str, kinds: set[str]) -> None:
    cleaned = clean_framing(raw, SOURCE)
    assert cleaned.text == caption
    assert set(cleaned.removed) == kinds
    assert find_framing(cleaned.text, SOURCE) is None


# translations that merely look like framing: nothing is taken off
KEPT = [
    (DE, SOURCE),
    ("Wichtig: Die Ergebnisse sind neu.", "Important: the results are new."),
    ("Erstens: wir messen alles.", "First: we measure everything."),
    ("Hier ist das Ergebnis.", "Here is the result."),
    ("Die maschinelle Übersetzung ist schwer.", "Machine translation is hard."),
    ("Übersetzung: ein schwieriges Problem.", "Translation: a hard problem."),
    ("Wir übersetzen ins Deutsche.", "We translate into German."),
    ('Das Paper "Attention Is All You Need" hat alles verändert.',
     'The paper "Attention Is All You Need" changed everything.'),
    ('"Hallo", sagte sie.', '"Hello," she said.'),
    ('"Hallo Welt"', '"Hello world"'),
    ("Das System (ein Transformer) ist schnell.", "The system (a transformer) is fast."),
    ("Die Zahl liegt bei 3 (siehe Tabelle 2).", "The figure is 3 (see table 2)."),
    ("Dies ist ein Test.", "This is a test."),
    ("Hier ist ein Beispiel: zwei Sätze.", "Here is an example: two sentences."),
    ("Sicher: das geht.", "Sure: that works."),
    ("Es ist langsam. Hinweis: es hilft trotzdem.", "It is slow. Note: it still helps."),
    ("这很慢。注意，它仍然有帮助。", "It is slow. Note that it still helps."),
]


@pytest.mark.parametrize(("text", "source"), KEPT)
def test_translations_that_look_like_framing_are_kept(text: str, source: str) -> None:
    cleaned = clean_framing(text, source)
    assert cleaned.text == text and cleaned.removed == ()
    assert find_framing(text, source) is None


@pytest.mark.parametrize(("text", "kind", "kept"), [
    ("The German translation would be Guten Morgen.", "commentary", ""),
    (f"{DE} Die Übersetzung ist informell, aber korrekt", "commentary", DE),
    (f"Guten Morgen, {SOURCE[:-1]} zusammen heute", "restated_source", "Guten Morgen"),
    ("Guten Morgen\nmore", "commentary", "Guten Morgen"),
    ("Hier ist die Übersetzung: Guten Morgen\nmore", "commentary", ""),  # then a label
])
def test_framing_left_after_cleaning_is_found_and_cut(text: str, kind: str, kept: str) -> None:
    found = find_framing(text, SOURCE)
    assert found is not None and found.kind == kind
    assert cut_framing(text, SOURCE) == kept


@pytest.mark.parametrize("partial", [
    "Here", "Here is", "Here is the", "Hier ist die", "Hier ist die Über", "In German, the",
    "German", "Translation", "Sure", "Voici la", '"', "«", "Übersetzung ins",
])
def test_a_partial_that_may_become_framing_is_held_back(partial: str) -> None:
    assert held_back(clean_framing(partial, SOURCE).text, SOURCE, "de") == ""


@pytest.mark.parametrize(("partial", "shown"), [
    ("Guten Morgen. Note", "Guten Morgen."),
    ("Guten Morgen. I hope", "Guten Morgen."),
    ("Guten Morgen", "Guten Morgen"),
    ("Hier ist das", "Hier ist das"),
    ('"Guten Morgen', "Guten Morgen"),
    ("Translation: Guten", "Guten"),
])
def test_a_partial_shows_what_cannot_become_framing(partial: str, shown: str) -> None:
    assert held_back(clean_framing(partial, SOURCE).text, SOURCE, "de") == shown


def test_an_opener_the_source_begins_with_is_not_held_back() -> None:
    assert held_back("Here is", "Here is the plan.", "de") == "Here is"


def test_a_stream_never_shows_framing_and_never_takes_text_back() -> None:
    out: list[str] = []
    cleaner = StreamCleaner(out.append, SOURCE, "de")
    for piece in ["Here", " is", " the", " translation", ":", " \"", "Guten", " Morgen",
                  " zusammen", ".\""]:
        cleaner.feed(piece)
        assert "Here" not in "".join(out) and '"' not in "".join(out)
    cleaner.finish(DE)
    assert "".join(out) == DE


@pytest.mark.parametrize(("before", "begun"), [
    ("", False), ("Here is the translation:", False), ("Here is the German translation", False),
    ("Sure!", False), ("Hier ist die Übersetzung:\n", False), ("Guten Morgen.", True),
    ("Here is the translation:\nGuten Morgen.", True), ("Hier ist das Ergebnis", True),
])
def test_an_answer_has_begun_after_content_not_after_a_lead_in(before: str,
                                                               begun: bool) -> None:
    from app.translation.framing import answer_begun

    assert answer_begun(before, SOURCE) is begun
