"""bench-concurrency: stream preparation, pooling and the side-by-side table (pure), and a
tiny real run of both configurations against in-process servers."""

from __future__ import annotations

import argparse

from eval.bench.concurrency import (
    RunFigures,
    _pool,
    asr_streams,
    closed_loop_streams,
    plot,
    run_all,
    table,
)
from eval.datasets.streams import Stream, Update
from eval.plots import save


def test_asr_streams_are_cut_and_end_final() -> None:
    s = Stream("1", [Update("a", False, 1.0), Update("a b", False, 5.0),
                     Update("a b c", True, 30.0)])
    (cut,) = asr_streams([s], max_seconds=10)
    assert [u.source for u in cut.updates] == ["a", "a b"] and cut.updates[-1].is_final


def test_pool_sums_work_and_pools_latencies_and_table_shows_the_ratio() -> None:
    a = RunFigures("closed", 2, 1, wall_s=10, updates=20, output_tokens=200,
                   final_latency_ms=[100.0])
    b = RunFigures("closed", 2, 1, wall_s=10, updates=20, output_tokens=200,
                   final_latency_ms=[300.0])
    base = _pool([a, b])
    assert (base.wall_s, base.updates, base.final_latency_ms) == (20, 40, [100.0, 300.0])
    fast = RunFigures("closed", 2, 2, wall_s=10, updates=40, output_tokens=400,
                      final_latency_ms=[150.0])
    text = table([base, fast]).markdown()
    assert "| closed | 2 |" in text and "2.00x" in text


def test_plot_marks_points_from_zero_with_the_sample_size(tmp_path) -> None:
    runs = [RunFigures("closed", c, p, wall_s=10, updates=10 * p, output_tokens=100,
                       final_latency_ms=[100.0]) for c, p in ((1, 1), (2, 1), (2, 2))]
    fig = plot(runs, "de", 2)
    (ax,) = fig.axes
    assert all(ln.get_marker() == "o" for ln in ax.get_lines())
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0
    assert "en→de" in ax.get_title() and any("n = C streams" in t.get_text() for t in ax.texts)
    assert save(fig, tmp_path / "c.png").stat().st_size > 1000


def test_tiny_real_run_of_both_configurations() -> None:
    args = argparse.Namespace(lang="de", speed=1.0, repeats=1, n_threads=None, model=None,
                              crowded_proposals=None, final_steps="lead")
    data = {"closed": closed_loop_streams(["Good morning.", "Thank you all."], lag=3)}
    results = run_all([1, 2], ["closed"], data, args)
    assert {(r.concurrency, r.parallel) for r in results} == {(1, 1), (2, 1), (2, 2)}
    assert all(r.lost_finals == 0 and r.final_latency_ms and not r.errors for r in results)
