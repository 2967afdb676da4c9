"""The pathology detectors on outputs seen in eval records, on their near misses, and on
generated members of each class (loops, copies) and of the legitimate text beside them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.translation.pathology import (
    begins_as_copy,
    copies_source,
    diagnose,
    ends_in_loop,
    loop_cut,
    loops,
    made_of_source,
    reproduces_example,
    wrong_script,
)
from app.translation.prompts import FewShotFormat

EXAMPLES = FewShotFormat().examples("en", "zh")


def test_a_copy_of_the_source_is_a_copy() -> None:
    src = "So on the left hand side, we see the input"
    assert copies_source("So on the left hand side,", src)
    assert copies_source("so on the left hand side we see", src)
    assert diagnose("So on the left hand side,", src, "de") == "copy"
    # into Chinese a copy is also in the wrong script; it is reported once, as a copy
    assert diagnose("So on the left hand side,", src, "zh") == "copy"


def test_translations_with_names_and_numbers_are_no_copy() -> None:
    src = "Barack Obama met Angela Merkel in Berlin in 2015."
    assert not copies_source("Barack Obama traf Angela Merkel 2015 in Berlin.", src)
    assert not copies_source("Auf der linken Seite sehen wir die Eingabe", "On the left we "
                             "see the input")
    assert not copies_source("Internet", "Internet")  # one word decides nothing
    # seen as a false alarm in ACL 60/60: a Chinese sentence quoting the English terms
    src = ("And here you have a few examples, words such as podcast, app, and online "
           "crowdfunding, all these are English words")
    assert not copies_source("和我们今天听的几个例句，如podcast, app, and online crowdfunding，"
                             "这些都是英语的单词，我们经常用在西班牙语中。", src)
    assert copies_source("Here you have a few examples, words such as podcast", src)
    assert diagnose("Barack Obama traf Angela Merkel 2015 in Berlin.", src, "de") is None


def test_wrong_script() -> None:
    assert wrong_script("So here we are", "zh")
    assert wrong_script("Das ist gut", "ja")
    assert wrong_script("这是一个例子", "de")
    assert wrong_script("Hello world", "ru")
    assert not wrong_script("这是 Python 的一个例子", "zh")
    assert not wrong_script("これはテストです", "ja")
    assert not wrong_script("漢字だけ", "ja")
    assert not wrong_script("GPU", "zh")  # too few letters to judge
    assert not wrong_script("2024 年", "zh")
    assert not wrong_script("Привет, мир", "uk")


def test_a_prompt_example_is_leakage_unless_the_speaker_said_it() -> None:
    leaked = "谢谢大家今天听这个报告"  # the third example, slightly varied, for "So here we"
    assert reproduces_example(leaked, "So here we", EXAMPLES)
    assert diagnose(leaked, "So here we", "zh", examples=EXAMPLES) == "prompt_example"
    said = "Thank you all for coming to this talk today."
    assert not reproduces_example("感谢大家今天来听这个报告。", said, EXAMPLES)
    assert not reproduces_example("所以我们在这里", "So here we", EXAMPLES)
    assert not reproduces_example("报告", "The report", EXAMPLES)  # too short to be an answer
    de = FewShotFormat().examples("en", "de")
    # seen as false alarms of a letter-by-letter match: short outputs spelled out inside
    # a long example
    assert not reproduces_example("So wir sind", "So we're going", de)
    assert not reproduces_example("Der Pilot war", "The pilot was", de)
    assert reproduces_example("Vielen Dank an Sie alle, dass Sie heute", "So here we", de)


def test_an_example_repeated_as_written_is_leakage_too() -> None:
    """An example's source sentence as the answer (a retry with the fragments right before
    the source answered a German final so), unless the speaker said it."""
    every = FewShotFormat().shown_examples("en", "de")
    fragment = "So on the right side you can see"
    assert (fragment, "Auf der rechten Seite sehen Sie also") in every
    assert diagnose(fragment, "Al Gore and General Tommy Franks", "de",
                    examples=every) == "prompt_example"
    assert reproduces_example("Auf der rechten Seite sehen Sie", "The capsule will", every)
    assert not reproduces_example(fragment, "So on the right side you can see the", every)
    assert not reproduces_example("Auf der rechten Seite sehen Sie also", fragment, every)
    assert not reproduces_example("Die Kapsel wird mit 12,8 km pro Sekunde fliegen.",
                                  "The capsule will be traveling at 12.8 km a second.", every)


def test_loops_are_detected_only_when_long_enough() -> None:
    assert ends_in_loop([9, 1, 2, 3, 4] * 3)
    assert ends_in_loop([5] * 12) and not ends_in_loop([5] * 11)
    assert ends_in_loop([0, 7, 8] * 4) and not ends_in_loop([0, 7, 8] * 3)
    assert not ends_in_loop(list(range(40)))
    assert not ends_in_loop([1, 2, 3, 4, 1, 2, 3, 4, 9])


def test_a_runaway_is_a_loop() -> None:
    assert diagnose("Am Montag, am Dienstag", "On Monday", "de", runaway=True) == "loop"


def test_clean_outputs_pass() -> None:
    assert diagnose("", "Hello", "de") is None
    assert diagnose("Guten Morgen, alle zusammen.", "Good morning, everyone.", "de") is None
    assert diagnose("大家早上好。", "Good morning, everyone.", "zh", examples=EXAMPLES) is None


# -- loops in text -----------------------------------------------------------------------------
# Generated loops: a clean prefix, then one span repeated back to back. The prefix's words
# are not the loop's, so the text before the repetition is known exactly.
PREFIX_WORDS = ["Wir", "sehen", "hier", "Ergebnisse", "unserer", "Studie", "über", "Sprache",
                "und", "Daten", "im", "Jahr", "Heute", "zeigen"]
LOOP_WORDS = ["Text", "Caption", "Verb", "Goal", "Minute", "Diplom", "gewaltig", "Schule",
              "Montag", "Dienstag", "so", "nein", "in", "der", "Regierungskant", "am"]
JOINERS = [" ", ", ", "-", " - ", "; ", "... ", "/", " – ", ". "]
CASES = [str, str.lower, str.upper, str.title]
HAN_LOOP = list("我们的今天来谈语言研究数据模型结果问题时间地方最强还有")
HAN_PREFIX = list("在这个报告中首先介绍")
SOURCE = "We see the results of our study on language and data this year"
MANY = settings(max_examples=150, deadline=None)


def _prefix(words: list[str]) -> str:
    return " ".join(words) + " " if words else ""


@MANY
@given(prefix=st.lists(st.sampled_from(PREFIX_WORDS), max_size=8, unique=True),
       phrase=st.lists(st.sampled_from(LOOP_WORDS), min_size=1, max_size=6, unique=True),
       joiner=st.sampled_from(JOINERS), more=st.integers(0, 5),
       cases=st.lists(st.sampled_from(CASES), min_size=12, max_size=12),
       tail=st.sampled_from(["", ".", "...", "-", ","]))
def test_repeated_words_phrases_and_fragments_are_loops(prefix: list[str], phrase: list[str],
                                                        joiner: str, more: int,
                                                        cases: list, tail: str) -> None:
    """One word four times or a phrase three times, joined by spaces, commas or hyphens,
    in any capitalisation; the cut keeps the prefix and one copy."""
    repeats = (4 if len(phrase) == 1 else 3) + more
    copies = [cases[i % len(cases)](joiner.join(phrase)) for i in range(repeats)]
    text = _prefix(prefix) + joiner.join(copies) + tail
    assert loops(text), text
    assert diagnose(text, SOURCE, "de") == "loop"
    assert text[:loop_cut(text)] == _prefix(prefix) + copies[0], text


@MANY
@given(prefix=st.lists(st.sampled_from(HAN_PREFIX), max_size=6),
       phrase=st.lists(st.sampled_from(HAN_LOOP), min_size=1, max_size=8, unique=True),
       joiner=st.sampled_from(["", "，", "、", " ", "。"]), more=st.integers(0, 3),
       lang=st.sampled_from(["zh", "ja"]))
def test_repeated_character_ngrams_without_spaces_are_loops(prefix: list[str],
                                                            phrase: list[str], joiner: str,
                                                            more: int, lang: str) -> None:
    """Chinese and Japanese have no spaces: a loop repeats character n-grams. Eight
    characters in all and three copies at least."""
    copy = "".join(phrase)
    repeats = max(3, -(-8 // len(phrase))) + more
    text = "".join(prefix) + joiner.join([copy] * repeats)
    assert loops(text), text
    assert diagnose(text, SOURCE, lang) == "loop"
    assert text[:loop_cut(text)] == "".join(prefix) + copy, text


@MANY
@given(unit=st.sampled_from(["a", "o", "!", "?", ".", "-", "ha", "la", "ab", "xyz", "abcd"]),
       more=st.integers(0, 10))
def test_repeated_characters_are_loops(unit: str, more: int) -> None:
    repeats = max(4, -(-12 // len(unit))) + more
    text = "Und dann " + unit * repeats
    assert loops(text) and diagnose(text, SOURCE, "de") == "loop"
    assert text[:loop_cut(text)] == "Und dann " + unit


def test_loops_seen_in_eval_records_are_cut_where_they_start() -> None:
    seen = {
        # the user's report, and the phrase it started from
        "Der Text: Text-Caption-Text-Caption-Text-Text-Text-Text": "Der Text: Text-Caption",
        "So, so, so, so, so, so, so": "So",
        "Hier haben Sie einige Beispiele von lexikalischer Verb-Verb-Verb-Verb-Verb":
            "Hier haben Sie einige Beispiele von lexikalischer Verb",
        "Am Dienstag, am Sonntag, am Dienstag, am Sonntag, am Dienstag, am Sonntag, am":
            "Am Dienstag, am Sonntag",
        "Piquet Jr. hat in der 2008 in der 2008 in der 2008": "Piquet Jr. hat in der 2008",
        "还有，还有，还有，还有，还有，还有，": "还有",
        "语言的跨词是，语言的跨词是，语言的跨词是。": "语言的跨词是",
        "傅先生是世界上最强最强最强最强最强最强": "傅先生是世界上最强",
        # the repetition's phase starts mid-phrase: the cut ends on the clause before it
        "まず、単語の借用語について、その意味について、そしてその意味について、そしてその意味について、そして":
            "まず、単語の借用語について、その意味について",
        "翻訳者: 翻訳者: 翻訳者:": "翻訳者",
        "Und dann!!!!!!!!!!!!": "Und dann!",
    }
    for text, kept in seen.items():
        assert diagnose(text, SOURCE, "ja" if "の" in text else "de") == "loop", text
        assert text[:loop_cut(text)] == kept, text


def test_a_runaway_without_a_strict_period_is_cut_where_it_stops_saying_anything_new() -> None:
    week = ("am Montag, am Dienstag, am Mittwoch, am Donnerstag, am Freitag, am Samstag, "
            "am Sonntag, am Montag, am Dienstag")
    assert not loops(week)  # a list, no back-to-back repetition: not cut unless runaway
    assert week[:loop_cut(week, runaway=True)] == week[: week.index(", am Montag, am Di")]
    assert loop_cut("Guten Morgen, alle zusammen", runaway=True) is None


@MANY
@given(words=st.lists(st.sampled_from(PREFIX_WORDS + LOOP_WORDS), min_size=1, max_size=14,
                      unique_by=str.lower),
       at=st.integers(0, 13), times=st.integers(2, 3), joiner=st.sampled_from(JOINERS),
       phrase_len=st.integers(2, 4))
def test_emphasis_and_twice_said_phrases_are_no_loops(words: list[str], at: int, times: int,
                                                      joiner: str, phrase_len: int) -> None:
    """"very, very", "Nein, nein, nein!", a phrase said twice: speech, not loops."""
    at = at % len(words)
    word = [joiner.join([words[at]] * times)]
    assert not loops(" ".join(words[:at] + word + words[at + 1:]))
    phrase = " ".join(words[at:at + phrase_len])
    assert not loops(" ".join(words[:at] + [phrase, phrase] + words[at + phrase_len:]))


@MANY
@given(start=st.integers(0, 2000), length=st.integers(1, 12),
       sep=st.sampled_from([", ", ".", ":", " ", "-", "/", " und "]),
       numbers=st.lists(st.integers(0, 10**6), min_size=1, max_size=10, unique=True))
def test_numbers_are_no_loops(start: int, length: int, sep: str, numbers: list[int]) -> None:
    assert not loops(sep.join(str(n) for n in range(start, start + length)))
    assert not loops(sep.join(str(n) for n in numbers))


def test_legitimate_repetition_is_no_loop() -> None:
    for text in ["very, very", "Es war sehr, sehr, sehr gut.", "1, 2, 3", "Hahaha", "Ha ha ha",
                 "hahahahaha", "0.0.0.0", "00:00:00", "1,000,000,000,000", "3.333333333333",
                 "Nein, nein, nein!", "Tora! Tora! Tora!", "Schritt für Schritt",
                 "step by step by step", "die, die die Regeln kennen", "ISBN 978-3-16-148410-0",
                 "Version 1.1.1.1", "bye bye", "Goooal", "Wie geht's? Wie geht's?",
                 "哈哈哈", "哈哈哈哈", "谢谢", "天天", "高高兴兴", "研究研究", "一个一个",
                 "はいはいはい", "どんどん", "ドキドキ", "いろいろ", "我们今天谈谈我们的研究。"]:
        assert not loops(text), text
        assert diagnose(text, "Hello", "de") != "loop"


@MANY
@given(chars=st.lists(st.sampled_from(HAN_LOOP + HAN_PREFIX), min_size=1, max_size=30,
                      unique=True),
       a=st.sampled_from(HAN_LOOP), b=st.sampled_from(HAN_PREFIX),
       form=st.sampled_from(["AA", "AABB", "ABAB", "AAA", "AAAA", "ABABAB", "AAAAAAA"]))
def test_cjk_reduplication_is_no_loop(chars: list[str], a: str, b: str, form: str) -> None:
    """Reduplicated words (天天, 高高兴兴, 研究研究, 哈哈哈哈) inside a sentence of distinct
    characters."""
    word = form.replace("A", a).replace("B", b)
    chars = [c for c in chars if c not in (a, b)]
    half = len(chars) // 2
    assert not loops("".join(chars[:half]) + word + "".join(chars[half:]))


# -- copies, whatever the capitalisation --------------------------------------------------------
COPIED_SOURCES = [
    "Attention Is All You Need",
    "Hi, this is Elena and I'm going to be presenting our work, Detecting Unassimilated "
    "Borrowings in Spanish",
    "Born in Hong Kong, Ma studied at New York University and Harvard Law School",
    "So on the left hand side, we see the input",
    "We Present BERT: Pre-training of Deep Bidirectional Transformers for Language",
    "On Monday, scientists from the Stanford University School of Medicine",
]
WORD_CASES = [str, str.lower, str.upper, str.title, str.capitalize]


@MANY
@given(source=st.sampled_from(COPIED_SOURCES), start=st.integers(0, 20),
       length=st.integers(3, 20), cases=st.lists(st.sampled_from(WORD_CASES), min_size=20,
                                                   max_size=20),
       seps=st.lists(st.sampled_from([" ", "  ", ", ", " - ", "-", " / "]), min_size=20,
                     max_size=20),
       quote=st.sampled_from(["", '"', "„"]), end=st.sampled_from(["", ".", "!", "…"]),
       lang=st.sampled_from(["de", "fr", "zh", "ja", "ru"]))
def test_a_copied_sentence_is_a_copy_whatever_its_capitalisation(
        source: str, start: int, length: int, cases: list, seps: list[str], quote: str,
        end: str, lang: str) -> None:
    """The whole source, or three words of it or more, in any capitalisation, punctuation
    and spacing, is a copy (into any target: before the wrong script)."""
    words = source.split()
    start = start % max(1, len(words) - 2)
    piece = words[start:start + length]
    out = "".join(cases[i](w) + (seps[i] if i < len(piece) - 1 else "")
                  for i, w in enumerate(piece))
    out = quote + out + end
    assert copies_source(out, source), out
    assert diagnose(out, source, lang) == "copy", out


def test_title_case_copies_the_old_detector_missed() -> None:
    src = ("Hi, this is Elena and I'm going to be presenting our work, Detecting "
           "Unassimilated Borrowings in Spanish: An Annotated Corpus")
    assert copies_source(src, src) and copies_source(src.upper(), src)
    assert copies_source("ATTENTION IS ALL YOU NEED", "attention is all you need")
    assert made_of_source("so on the lefthand side", "So on the left hand side")
    assert diagnose("Born in Hong Kong, Ma studied at New York University.",
                    "Born in Hong Kong, Ma studied at New York University and Harvard", "zh") \
        == "copy"


KEPT_NAMES = [
    ('The paper "Attention Is All You Need" changed everything.',
     'Das Paper „Attention Is All You Need" hat alles verändert.'),
    ("Apple announced the iPhone 15 Pro today.", "Apple hat heute das iPhone 15 Pro vorgestellt."),
    ("Barack Obama met Angela Merkel in Berlin in 2015.",
     "Barack Obama traf Angela Merkel 2015 in Berlin."),
    ('"Panama Papers" is', '„Panama Papers" ist'),
    ("Lexical borrowing is", "Lexikalische Entlehnung ist"),
    ("John Grant, from WNED Buffalo (Reading", "John Grant, von WNED Buffalo (Reading"),
    ("Elena presents Detecting Unassimilated Borrowings in Spanish.",
     "Elena stellt Detecting Unassimilated Borrowings in Spanish vor."),
    ("We read the New York Times Best Seller List.",
     "Wir lesen die Bestsellerliste der New York Times."),
    ("Angela Merkel", "Angela Merkel"),  # two words (a name) are too few to tell
    ("Internet", "Internet"),
]
TITLES = ["Attention Is All You Need", "Deep Residual Learning for Image Recognition",
          "BERT", "iPhone 15 Pro Max", "Language Models are Few-Shot Learners",
          "The Lord of the Rings", "Harry Potter and the Philosopher's Stone"]
FRAMES = [('The paper "{}" changed everything.', 'Das Paper „{}" hat alles verändert.'),
          ('Yesterday we read "{}" and discussed it.',
           'Gestern haben wir „{}" gelesen und darüber gesprochen.'),
          ('The title is "{}", she said.', 'Der Titel lautet „{}", sagte sie.')]


@MANY
@given(title=st.sampled_from(TITLES), frame=st.sampled_from(FRAMES),
       case=st.sampled_from(CASES))
def test_a_translation_that_keeps_a_title_or_a_name_is_no_copy(title: str, frame: tuple,
                                                               case) -> None:  # noqa: ANN001
    source, translation = frame[0].format(title), frame[1].format(case(title))
    assert not copies_source(translation, source), translation
    assert diagnose(translation, source, "de") is None, translation


def test_translations_keeping_names_are_no_copy() -> None:
    for source, translation in KEPT_NAMES:
        assert not copies_source(translation, source), translation


def test_an_answer_begins_as_a_copy_when_its_first_words_are_all_the_sources() -> None:
    source = "According to reports, an apartment on Macbeth Street exploded due to a gas leak."
    # the model's own near-copy: "In" and "the" are not the source's (diagnosed when it ends)
    assert not begins_as_copy("In the report, an apartment on", source)
    assert begins_as_copy("According to reports, an", source)
    assert begins_as_copy("according to REPORTS, an", source)  # any case
    # names pass through any translation: too few lower-case words to tell (a clean de-en
    # answer began with these four of its source's words)
    german = "Apple-Chef Steve Jobs stellte das Gerät vor, indem er die Bühne betrat."
    assert not begins_as_copy("Apple CEO Steve Jobs", german.replace("-Chef", " CEO"))
    assert not begins_as_copy("According to reports", source)  # three words: too few
    assert not begins_as_copy("Laut Berichten explodierte eine", source)
    assert not begins_as_copy("Macbeth Street exploded wegen", source)  # a word of its own
    # names and numbers a translation keeps are too few words to trip it
    assert not begins_as_copy("Die Macbeth Street", source)
    assert not begins_as_copy("マクベス通りの apartment", source)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from("the of and committee met budget on to".split()),
                min_size=4, max_size=8))
def test_any_four_or_more_of_the_sources_own_words_begin_a_copy(words: list[str]) -> None:
    source = "The committee met on Tuesday evening to discuss the budget and of course more."
    assert begins_as_copy(" ".join(words), source)
    assert not begins_as_copy(" ".join(words) + " Haushalt", source)
