"""``livetrans bench speech``: the virtual clock, how finals are tied to sentences, and one
tiny real run (espeak-ng speech, Whisper base and PocketSphinx)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.speech.resample import RATE
from eval.bench.speech.bench import (
    Final,
    Replay,
    Talk,
    VirtualClock,
    assign,
    closing_finals,
    main,
    summarise,
    trim_silence,
)
from eval.datasets.aligned import DatasetNotFoundError
from tests.speech import needs_espeak


def test_a_recogniser_faster_than_real_time_waits_for_audio_a_slower_one_falls_behind() -> None:
    fast, slow = VirtualClock(), VirtualClock()
    for i in range(1, 11):  # ten 100 ms chunks
        fast.advance(i * 0.1, 0.02)
        slow.advance(i * 0.1, 0.15)
    assert fast.now == pytest.approx(1.02)  # done 20 ms after the last chunk arrived
    assert slow.now == pytest.approx(0.1 + 10 * 0.15)  # busy from the first chunk on


def _talk() -> Talk:
    """Three sentences: speech 0.5-2.5 s, 3.5-6.0 s, 7.0-9.0 s (1 s pauses)."""
    return Talk("t", ["one two", "three four", "five six"], np.zeros(int(10 * RATE)),
                starts_s=[0.5, 3.5, 7.0], ends_s=[2.5, 6.0, 9.0])


def test_finals_belong_to_the_sentence_being_heard_give_or_take_half_a_second() -> None:
    talk = _talk()
    late = Final("one two", heard_s=3.8, out_s=4.4)  # decided in the next sentence's start
    halves = [Final("three", heard_s=5.0, out_s=5.3), Final("four", heard_s=6.6, out_s=7.0)]
    merged = Final("five six", heard_s=9.5, out_s=9.8)  # nothing before: sentence 1 merged
    own = assign([late, *halves, merged], talk)
    assert own == [[late], halves, [merged]]
    assert closing_finals(own) == [late, halves[1], merged]
    own = assign([halves[0], merged], talk)
    assert closing_finals(own) == [halves[0], halves[0], merged]  # a merge: the next final


def test_the_summary_counts_splits_and_merges_and_times_each_sentence() -> None:
    talk = _talk()
    finals = [Final("one two three", 6.6, 7.1), Final("four", 6.7, 7.3),
              Final("five six", 9.5, 10.0)]
    s = summarise("r", talk, Replay(finals, compute_s=2.0))
    assert (s["sentences"], s["finals"], s["split_sentences"], s["merged_sentences"]) == \
        (3, 3, 1, 1)
    assert s["wer"] == 0.0  # joined, the words are all there
    # sentence 0 merged into the first final of sentence 1 (out at 7.1 s, its end 2.5 s)
    assert [p["latency_s"] for p in s["per_sentence"]] == [pytest.approx(4.6),
                                                           pytest.approx(1.3),
                                                           pytest.approx(1.0)]
    assert s["per_sentence"][0]["hypothesis"] == ""
    assert s["real_time_factor"] == 0.2


def test_silence_around_speech_is_trimmed() -> None:
    speech = np.r_[np.zeros(100), np.full(50, 1000.0), np.zeros(10), np.full(5, -900.0),
                   np.full(80, 3.0)]
    assert len(trim_silence(speech)) == 65
    assert len(trim_silence(np.zeros(10))) == 0


def test_a_wrong_folder_or_recogniser_fails_before_any_model_loads(tmp_path) -> None:
    with pytest.raises(DatasetNotFoundError, match="FLORES"):
        main(["--flores-dir", str(tmp_path), "--datasets", "flores", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        main(["--recognizers", "whisper,kaldi"])


@needs_espeak
def test_both_recognisers_on_two_spoken_sentences(data_dir, tmp_path, capsys) -> None:
    out = tmp_path / "sb"
    assert main(["--flores-dir", str(data_dir / "flores200"), "--datasets", "flores",
                 "--sentences", "2", "--asr-threads", "2", "--speakers", "1",
                 "--out", str(out)]) == 0
    summaries = json.loads((out / "speech_bench.json").read_text())
    assert [(s["recognizer"], s["dataset"]) for s in summaries] == [
        ("whisper", "flores"), ("pocketsphinx", "flores")]
    for s in summaries:
        assert s["sentences"] == 2 and s["finals"] >= 1
        assert len(s["per_sentence"]) == 2 and s["compute_s"] > 0
        assert all(p["latency_s"] is None or p["latency_s"] > 0 for p in s["per_sentence"])
        assert s["wer_counts"]["reference_words"] > 10
    whisper, sphinx = summaries
    assert whisper["window_fallbacks"] >= 0 and sphinx["window_fallbacks"] is None
    # espeak's voice is hard on both; Whisper still hears far more of it (0.42 vs 0.9 here)
    assert whisper["finals"] == 2 and whisper["wer"] < min(0.6, sphinx["wer"]), summaries
    printed = capsys.readouterr().out
    assert "pocketsphinx" in printed and "Welcome to the livetrans demo" in printed
    assert "final latency p50 s" in (out / "speech_bench.md").read_text()
    # the engine's side: one audio speaker beside the text speaker, on a real server
    (cost,) = json.loads((out / "speech_cost.json").read_text())
    assert cost["audio_speakers"] == 1 and cost["audio_finals"] >= 1
    assert cost["text_finals"] >= 1 and cost["text_errors"] == cost["audio_errors"] == 0
    assert "audio WER" in (out / "speech_bench.md").read_text()
