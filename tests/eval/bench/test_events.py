"""``livetrans bench events``: its summaries and, end to end, a tiny run on the sample."""

from __future__ import annotations

import json
from pathlib import Path

from eval.bench.events import Run, main, table

SAMPLE = Path(__file__).resolve().parents[3] / "eval" / "samples" / "flores_layout"


def test_a_runs_summary_derives_its_rates() -> None:
    run = Run("viewers", langs=3, sessions=1, viewers=200, updates=10, wall_s=5.0,
              decode_ms=[100.0, 300.0], rss_before_mb=100.0, rss_after_mb=110.0)
    s = run.summary()
    assert s["ms_per_update"] == 500.0 and s["decode_ms_per_caption"] == 200.0
    assert s["rss_kb_per_viewer"] == 51.2 and "decode_ms" not in s
    assert table([run]).rows[0][:4] == ["viewers", "3", "1", "200"]


def test_a_small_run_writes_its_results_and_loses_no_caption(tmp_path: Path, capsys) -> None:
    code = main(["--flores-dir", str(SAMPLE), "--sentences", "1", "--viewers", "3",
                 "--fanout", "1", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().out
    runs = json.loads((tmp_path / "events.json").read_text())
    assert [r["name"] for r in runs][:3] == ["no viewers", "3 viewers", "no viewers again"]
    assert all(r["errors"] == 0 and r["captions"] >= r["updates"] for r in runs)
    viewers = runs[1]
    assert viewers["viewer_frames"] > 0
    assert (tmp_path / "events.md").read_text().startswith("| run |")
