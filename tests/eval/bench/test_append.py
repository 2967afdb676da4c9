"""``livetrans bench append`` (eval/bench/append.py): the delays each mode gives the final's
words, and one small run on the samples with the real model."""

from __future__ import annotations

import json
import math

from eval.bench.append import Emission, StreamRun, glued, main, unit_len, word_delays


def _run(texts: list[tuple[str, float]]) -> StreamRun:
    run = StreamRun(emissions=[Emission(text, t, t + 0.5) for text, t in texts])
    run.final = texts[-1][0]
    return run


def test_unit_len_counts_words_or_characters() -> None:
    assert unit_len("Der  Hund läuft. ", "word") == 3
    assert unit_len(" 犬が走る。", "char") == 5
    assert unit_len("", "word") == 0


def test_a_delta_that_extends_a_word_is_glued() -> None:
    assert glued("es", "word") and not glued(" läuft", "word")
    assert not glued(",", "word") and not glued("走る", "char") and not glued("", "word")


def test_committed_words_count_from_their_commit() -> None:
    run = _run([("Der", 1.0), ("Der Hund", 2.0), ("Der Hund läuft schnell.", 3.0)])
    assert word_delays(run, "word", "append", aware=False) == [1.0, 2.0, 3.0, 3.0]
    assert word_delays(run, "word", "append", aware=True) == [1.5, 2.5, 3.5, 3.5]
    assert word_delays(run, "word", "final", aware=False) == [3.0] * 4


def test_revisable_words_count_from_when_they_stopped_changing() -> None:
    run = _run([("Die Katze", 1.0), ("Der Hund rennt", 2.0), ("Der Hund läuft.", 3.0)])
    assert word_delays(run, "word", "revisable", aware=False) == [2.0, 2.0, 3.0]


def test_a_small_run_on_the_samples(data_dir, tmp_path) -> None:
    assert main(["--data-dir", str(data_dir), "--datasets", "flores", "--langs", "de",
                 "--limit", "1", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "append_summary.json").read_text())
    row = rows["flores de"]
    assert row["streams"] == 1 and row["append_ne_char"] == 0.0
    assert not math.isnan(row["append_laal_cu"])
    assert (tmp_path / "append.md").read_text().startswith("| dataset / lang")
