"""The pathology detectors on outputs seen in eval records, and on their near misses."""

from __future__ import annotations

from app.pathology import (
    copies_source,
    diagnose,
    ends_in_loop,
    reproduces_example,
    wrong_script,
)
from app.prompts import FewShotFormat

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
