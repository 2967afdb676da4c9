"""Display policies scored from records: the metrics on hand-made streams, one real run."""

from __future__ import annotations

import gzip
import json

import pytest

from eval.display_eval import (
    display_report,
    main,
    mode_tables,
    parse_modes,
    read_records,
    stream_displays,
    summarize_display,
)
from eval.metrics.display import (
    arrival_times,
    computed_times,
    final_rewrite,
    first_display_delays,
    first_display_index,
    partial_retractions,
    shown_early,
    source_word_index,
)
from eval.tables import markdown


def _stream(sid: str, steps: list[tuple[int, str]], method: str = "ssbd-b0.2",
            t: list[float] | None = None) -> list[dict]:
    recs = []
    for i, (read, text) in enumerate(steps):
        recs.append({"dataset": "flores", "lang": "de", "method": method, "stream": sid,
                     "update": i, "read": read, "t": None if t is None else t[i],
                     "final": i == len(steps) - 1, "text": text, "decode_ms": 100.0,
                     "reference": "A B C D", "source": "x " * read})
    return recs


GROWS = [(3, "A"), (6, "A B X"), (7, "A B C D")]       # agrees, then completes
TURNS = [(3, "A B C"), (6, "A X Y Z"), (7, "A X Y Z W")]  # the model changes its mind


def test_clocks() -> None:
    assert arrival_times([3, 6], [None, None], 0.5) == [1.5, 3.0]
    assert arrival_times([3, 6], [0.5, 1.0]) == [0.5, 1.0]  # recorded times win
    # one engine, in order: the second update waits for the first
    assert computed_times([0.0, 0.1, 5.0], [1.0, 1.0, 0.5]) == [1.0, 2.0, 5.5]


def test_first_display_definition() -> None:
    shown = [[], ["A"], ["A", "B", "C", "D"]]
    assert first_display_index(shown) == [1, 2, 2, 2]
    # a unit is first displayed at its place after a correct prefix, even if retracted later
    assert first_display_index([["A", "B"], ["A"], ["A", "B"]]) == [0, 0]
    assert first_display_index([["Z", "B"], ["A", "B"]]) == [1, 1]
    # diagonal alignment: 4 target units over 7 source words
    assert [source_word_index(j, 7, 4) for j in range(4)] == [2, 4, 6, 7]
    arrive = [3.0, 6.0, 7.0]
    assert first_display_delays(shown, [3, 6, 7], arrive, arrive) == [3.0, 1.0, 1.0, 0.0]
    later = [a + 0.1 for a in arrive]
    assert first_display_delays(shown, [3, 6, 7], arrive, later) == \
        pytest.approx([3.1, 1.1, 1.1, 0.1])
    assert first_display_delays([[], []], [3, 6], arrive[:2], arrive[:2]) == []


def test_retractions_and_final_rewrite() -> None:
    shown = [["A", "B"], ["A", "X", "Y"], ["A", "Q"], ["B"]]
    assert partial_retractions(shown) == 1 + 2
    assert final_rewrite(shown) == 2
    assert partial_retractions(shown[-2:]) == 0 and final_rewrite(shown[:1]) == 0
    assert shown_early([[], ["A"], ["A", "B"]]) == (1, 2)


def test_displays_of_each_policy_on_records() -> None:
    recs = _stream("0", TURNS)
    assert stream_displays(recs, "stable", None, "de", None) == ["", "A", "A X Y Z W"]
    assert stream_displays(recs, "mask-k", 1, "de", None) == ["A B", "A X Y", "A X Y Z W"]

    vocab = {1: " A", 2: " B", 3: " C"}
    tok = [dict(r, token_ids=[1, 2, 3][: i + 1]) for i, r in enumerate(_stream("1", GROWS))]
    shown = stream_displays(tok, "mask-k", 1, "de",
                            lambda ids: "".join(vocab[i] for i in ids))
    assert shown == ["", "A", "A B C D"]  # tokens masked, then detokenized; final whole


def test_summary_rows_and_tables() -> None:
    records = _stream("0", GROWS) + _stream("1", TURNS)
    summary = summarize_display(records, ["mask-k", "stable"], [1], None, word_s=1.0)
    assert set(summary) == {"flores|de|ssbd-b0.2|mask-k|1", "flores|de|ssbd-b0.2|stable"}
    stable = summary["flores|de|ssbd-b0.2|stable"]
    mask = summary["flores|de|ssbd-b0.2|mask-k|1"]
    assert stable["streams"] == 2 and stable["updates"] == 6
    assert stable["retracted_partial_units"] == 0 and stable["final_rewrite_units"] == 0
    assert mask["retracted_partial_units"] == 1  # "A B" -> "A X Y"
    assert mask["mask_on"] == "word" and stable["mask_on"] is None
    assert stable["NE"] == mask["NE"]  # same outputs, different displays
    assert stable["NE_display"] == 0.0 and mask["NE_display"] == pytest.approx(1 / 9)
    # GROWS: stable 3,1,1,0 (see above). TURNS: 5 units over 7 words, source words
    # 2,3,5,6,7 arrive at 3,3,6,6,7; A shown at update 1 (6), X Y Z W at the final (7)
    assert stable["first_display_s_mean"] == pytest.approx((3 + 1 + 1 + 0 + 3 + 4 + 1 + 1 + 0)
                                                          / 9)
    assert stable["first_display_ca_s_mean"] == pytest.approx(
        stable["first_display_s_mean"] + 0.1)
    assert stable["final_latency_ca_s_p50"] == pytest.approx(0.1)
    assert stable["final_decode_ms_p50"] == pytest.approx(100.0)
    assert stable["chrF"] == mask["chrF"] and stable["chrF"] is not None
    assert mask["first_display_s_mean"] < stable["first_display_s_mean"]

    text = markdown(mode_tables(summary, ["mask-k", "stable"]))
    assert "### Display mode `mask-k`" in text and "### Display mode `stable`" in text
    assert text.count("| flores | de | ssbd-b0.2 |") == 2


def test_asr_times_and_incomplete_streams() -> None:
    recs = _stream("7", GROWS, t=[0.5, 1.0, 1.2])
    partial_only = _stream("8", GROWS)[:2]  # interrupted: no final, left out
    summary = summarize_display(recs + partial_only, ["stable"], [], None)
    row = summary["flores|de|ssbd-b0.2|stable"]
    assert row["streams"] == 1
    # arrivals 0.5, 1.0, 1.2: A at update 1 (1.0 - 0.5), B C D at the final
    assert row["first_display_s_mean"] == pytest.approx((0.5 + 0.2 + 0.2 + 0.0) / 4)


def test_modes_are_checked() -> None:
    assert parse_modes("mask-k, stable") == ["mask-k", "stable"]
    with pytest.raises(ValueError):
        parse_modes("mask-k,fancy")


def test_cli_reads_gzipped_records(tmp_path) -> None:
    records = _stream("0", GROWS) + _stream("1", TURNS, method="ar")
    with gzip.open(tmp_path / "records.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    assert read_records(tmp_path / "records.jsonl.gz") == records
    assert main(["--out", str(tmp_path), "--mask-k", "1,2"]) == 0
    text = (tmp_path / "display.md").read_text()
    assert "k | streams" in text and "| flores | de | ar | 2 |" in text
    assert (tmp_path / "plots" / "display_flores_de.png").exists()
    summary = json.loads((tmp_path / "display_summary.json").read_text())
    assert len(summary) == 2 * 3  # two methods x (mask-k 1, mask-k 2, stable)

    text = markdown(display_report(records, ["stable"], [], None, tmp_path / "hook"))
    assert "Display mode `stable`" in text and "mask-k" not in text.split("Plots")[0]
    assert (tmp_path / "hook" / "display.md").read_text() == text


def test_real_run_scores_both_modes(data_dir, tmp_path) -> None:
    """One small real eval (the model, one FLORES stream), then the display report."""
    from eval.harness import main as harness

    out = tmp_path / "run"
    assert harness(["--dataset", "flores", "--flores-dir", str(data_dir / "flores200"),
                    "--langs", "de", "--limit", "1", "--offset", "5", "--lag", "4",
                    "--methods", "", "--betas", "0.2", "--mask-k", "3",
                    "--out", str(out)]) == 0
    assert main(["--out", str(out), "--mask-k", "3"]) == 0
    summary = json.loads((out / "display_summary.json").read_text())
    stable = summary["flores|de|ssbd-b0.2|stable"]
    mask = summary["flores|de|ssbd-b0.2|mask-k|3"]
    assert stable["retracted_partial_units"] == 0
    assert mask["mask_on"] == "tokens"  # the server's mask-k, reproduced from token ids
    # mask-k from token ids is exactly the harness's display-only NE
    tables = json.loads((out / "summary.json").read_text())
    assert mask["NE_display"] == pytest.approx(tables["flores|de|ssbd-b0.2"]["NE_display_k3"])
