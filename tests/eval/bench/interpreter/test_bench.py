"""``livetrans bench interpreter``: how timed realtime events become per-sentence latencies
(made-up events, no server), and one tiny real run (1 speaker, 1 sentence: espeak-ng
speech through the official SDK) whose report has the promised shape. No timing bounds:
the figures depend on the machine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from eval.bench.interpreter.bench import main
from eval.bench.interpreter.talk import FRAME, RATE, Talk, Timed, assign, latencies, segments
from tests.speech import needs_espeak

OUT, IN, AUDIO = ("session.output_transcript.delta", "session.input_transcript.delta",
                  "session.output_audio.delta")
SENTENCES = ["The committee will publish its report.", "Thank you all for coming today."]


def _events() -> list[Timed]:
    return [Timed(OUT, 9.5, "Der"), Timed(OUT, 10.2, " Ausschuss"), Timed(AUDIO, 10.4),
            Timed(IN, 11.0, "The committee will publish its report."),
            Timed(AUDIO, 11.5), Timed(OUT, 14.0, " Danke"),
            Timed(IN, 14.5, " Thank you all for coming today.")]


def test_output_deltas_belong_to_the_segment_whose_final_follows_them() -> None:
    segs = segments(_events())
    assert [(s.first_word_at, s.final_at, s.output, s.deltas) for s in segs] == [
        (9.5, 11.0, "Der Ausschuss", 2), (14.0, 14.5, "Danke", 1)]


def test_latencies_run_from_each_sentence_end_and_can_be_negative() -> None:
    talk = Talk(SENTENCES, np.zeros(RATE * 10, dtype="<i2"), [3.0, 8.0])
    rows = latencies(_events(), talk, ends_at=[10.0, 13.0])
    assert [(r["first_word_s"], r["first_audio_s"], r["final_s"]) for r in rows] == [
        (-0.5, 0.4, 1.0), (1.0, None, 1.5)]
    assert rows[0]["translation"] == "Der Ausschuss" and rows[1]["segments"] == 1
    assert talk.end_frames() == [int(3.0 * RATE) // FRAME, int(8.0 * RATE) // FRAME]


def test_split_merged_and_misheard_segments_are_tied_to_sentences_in_order() -> None:
    def seg(text: str):  # noqa: ANN202 - a Segment
        return segments([Timed(IN, 0.0, text)])[0]

    split = assign([seg("The committee will"), seg("publish its report"),
                    seg("Thank you")], SENTENCES)
    assert [len(s) for s in split] == [2, 1]
    # a misheard next sentence sharing one word with each: the sentence still without one
    tie = assign([seg("The committee will publish"), seg("all the reports")], SENTENCES)
    assert [len(s) for s in tie] == [1, 1]
    assert [len(s) for s in assign([seg("nothing alike")], SENTENCES)] == [0, 0]


@needs_espeak
def test_a_tiny_run_writes_the_report(tmp_path: Path, capsys) -> None:
    assert main(["--speakers", "1", "--sentences", "1", "--pause-s", "1.5",
                 "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "interpreter_bench.json").read_text())
    assert set(report) == {"machine", "voice", "settings", "summaries", "runs"}
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu"]
    assert "load_1m" in report["machine"] and "load_1m_after" in report["summaries"][0]
    (summary,) = report["summaries"]
    assert summary["speakers"] == 1 and summary["sentences"] == 1
    for metric in ("first_word_s", "first_audio_s", "final_s"):
        assert set(summary[metric]) == {"p50", "p90", "n"}
    (row,) = report["runs"][0]["rows"]
    assert {"speaker", "sentence", "heard", "translation", "first_word_s", "first_audio_s",
            "final_s", "segments", "output_deltas", "session_errors"} <= set(row)
    assert row["heard"] and row["final_s"] is not None  # the sentence was heard, translated
    md = (tmp_path / "interpreter_bench.md").read_text()
    assert "cores" in md and "| speakers |" in md
    assert "| 1 | 1 |" in capsys.readouterr().out and "load" in md


def test_bad_speaker_counts_are_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--speakers", "0"])
    assert exit_.value.code == 2 and "--speakers" in capsys.readouterr().err
