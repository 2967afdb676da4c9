"""``eval.bench.speech.cost``: audio speakers beside a text speaker on the real server."""

from __future__ import annotations

import pytest

from eval.bench.speech.bench import PAUSE_S, compose
from eval.bench.speech.breakdown import PARTS, breakdown_table
from eval.bench.speech.cost import cost_run, cost_table, match_ends, versus_table
from eval.datasets.asr_partials import read_asr_streams
from tests.speech import ESPEAK, SENTENCES, wer


def test_each_final_answers_the_earliest_sentence_that_ended_before_it() -> None:
    ends = [2.0, 5.0, 9.0]
    assert match_ends([3.0, 6.5, 10.0], ends) == [1.0, 1.5, 1.0]
    # a sentence heard as two finals counts once; a final before any end is not counted
    assert match_ends([1.0, 3.0, 3.5, 7.0], ends) == [1.0, 2.0]


@pytest.mark.skipif(ESPEAK is None, reason="Debian package 'espeak-ng' is not installed")
def test_one_audio_speaker_beside_a_text_speaker(live_server, data_dir) -> None:
    talk = compose("test", SENTENCES[:1])
    assert talk.seconds == pytest.approx(talk.ends_s[0] + PAUSE_S, abs=0.01)
    utterances = read_asr_streams(data_dir / "asr_partials" / "flores200_dev_en.jsonl", 1)
    run = cost_run(live_server, talk, utterances, speakers=1)
    summary = run.summary(lambda sources: wer(" ".join(talk.sentences), " ".join(sources)))
    assert summary["text_finals"] == 1 and summary["audio_finals"] == 1
    assert summary["audio_end_of_speech_to_final_s_p50"] > 0
    assert summary["audio_wer"] <= 0.3
    assert summary["asr_real_time_factor"] > 0
    assert summary["text_errors"] == summary["audio_errors"] == 0
    assert "audio WER" in cost_table([summary]).markdown()
    # where the final's time went: every part measured, none negative but what is left
    (parts,) = run.audio[0].parts
    for part in PARTS[:-1]:
        assert parts[part] >= 0, (part, parts)
    assert sum(parts[p] for p in PARTS[:-1]) <= parts["total"] + 0.01, parts
    assert summary["breakdown"]["finals"] == 1
    assert "where it goes" in breakdown_table([summary]).markdown()


def _summary(server: str, round_: int, text_p50: float, audio_p50: float) -> dict:
    return {"server": server, "round": round_, "audio_speakers": 1,
            "text_final_latency_s_p50": text_p50, "text_final_latency_s_p95": text_p50 * 2,
            "audio_end_of_speech_to_final_s_p50": audio_p50,
            "audio_end_of_speech_to_final_s_p90": audio_p50 * 2, "text_captions": 50}


def test_the_versus_table_gives_medians_over_rounds_and_the_ratio_without_over_with() -> None:
    runs = [_summary("default", 1, 2.0, 3.0), _summary("no core loans", 1, 6.0, 6.0),
            _summary("default", 2, 4.0, 5.0), _summary("no core loans", 2, 8.0, 10.0)]
    row = versus_table(runs, "core loans", "no core loans").rows[0]
    assert row[:3] == ["1", "2", "3.00 / 7.00 (2.33x)"]
    assert row[4] == "4.00 / 8.00 (2.00x)"
    # no counterpart: no ratio
    assert versus_table(runs[:1], "core loans", "no core loans").rows == []
