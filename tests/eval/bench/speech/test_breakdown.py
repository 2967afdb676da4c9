"""``eval.bench.speech.breakdown``: a final's latency split into the parts its caption's
``stats`` measured, and their percentiles per run."""

from __future__ import annotations

import pytest

from eval.bench.speech.breakdown import PARTS, breakdown, breakdown_table, final_parts
from eval.bench.speech.cost import match_finals, timed_parts

STATS = {"queue_wait_ms": 40.0, "decode_ms": 360.0,
         "speech": {"ended_by": "silence", "speech_end_s": 5.1, "heard_s": 6.2,
                    "endpoint_silence_ms": 600.0, "late_audio_ms": 500.0,
                    "audio_wait_ms": 100.0, "asr_wait_ms": 300.0,
                    "asr_behind_partials_ms": 250.0, "asr_behind_finals_ms": 0.0,
                    "asr_decode_ms": 200.0, "handoff_ms": 1.0}}


def test_a_final_latency_splits_into_the_parts_its_caption_measured() -> None:
    parts = final_parts(end_s=5.0, latency_s=2.5, stats=STATS)
    assert parts is not None
    assert parts["endpoint"] == pytest.approx(6.2 - 0.5 - 5.0)  # heard, less what came late
    assert parts["wait"] == pytest.approx(0.5 + 0.1 + 0.3)
    assert parts["behind_partials"] == pytest.approx(0.25)
    assert parts["decode"] == pytest.approx(0.2)
    assert parts["translation"] == pytest.approx(0.4)
    assert parts["other"] == pytest.approx(2.5 - 0.7 - 0.9 - 0.2 - 0.4)
    assert sum(parts[p] for p in PARTS) == pytest.approx(parts["total"])
    # a final whose speech ended before its sentence did counts no endpoint silence
    early = final_parts(end_s=7.0, latency_s=1.0, stats=STATS)
    assert early is not None and early["endpoint"] == 0
    assert final_parts(5.0, 2.5, {"queue_wait_ms": 1.0}) is None  # a caption without them


def test_each_final_is_timed_against_the_sentence_it_answers() -> None:
    arrivals, ends = [1.0, 3.0, 3.5, 7.0], [2.0, 5.0, 9.0]
    assert match_finals(arrivals, ends) == [(1, 0), (3, 1)]
    stats = [STATS, STATS, {}, STATS]
    rows = timed_parts(arrivals, ends, stats)
    assert [r["total"] for r in rows] == [pytest.approx(1.0), pytest.approx(2.0)]


def test_percentiles_per_part_and_the_table() -> None:
    rows = [final_parts(5.0, latency, STATS) for latency in (2.0, 2.5, 3.0)]
    summary = breakdown([r for r in rows if r is not None])
    assert summary["finals"] == 3
    for part in (*PARTS, "total"):
        assert summary[f"{part}_s_p50"] <= summary[f"{part}_s_p90"]
    assert summary["total_s_p50"] == pytest.approx(2.5)
    assert sum(summary[f"{p}_s_p50"] for p in PARTS if p != "other") <= summary["total_s_p50"]
    assert breakdown([])["total_s_p90"] is None
    table = breakdown_table([{"audio_speakers": 2, "breakdown": summary},
                             {"audio_speakers": 0, "breakdown": breakdown([])}])
    assert len(table.rows) == 1 and table.rows[0][:2] == ["2", "3"]
    assert "where it goes" in table.markdown()
