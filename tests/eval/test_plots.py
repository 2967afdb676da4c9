"""The eval's figures from a small synthetic run: written, points marked, axes from 0 (or
labelled otherwise), the sample size on the plot."""

from __future__ import annotations

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from eval import plots
from eval.report import plots as write_plots
from eval.report import summarize

SENTENCES = [("a b c d e f", "A B C D E F"), ("g h i j", "G H I J"), ("k l m", "K L M")]


def _records(method: str, wobble: bool) -> list[dict]:
    recs = []
    for sid, (src, ref) in enumerate(SENTENCES):
        words = src.split()
        outs = [" ".join(w.upper() for w in words[:n]) for n in range(2, len(words) + 1)]
        if wobble:  # one retracted word per stream
            outs[0] = outs[0].rsplit(" ", 1)[0] + " Z"
        for i, text in enumerate(outs):
            recs.append({"dataset": "flores", "lang": "de", "method": method,
                         "stream": str(sid), "update": i, "source": " ".join(words[:i + 2]),
                         "read": i + 2, "t": None, "final": i == len(outs) - 1, "text": text,
                         "reference": ref, "tokens": len(text.split()), "drafted": 2,
                         "accepted": 1, "decode_ms": 40.0 + 10 * i, "prompt_ms": 5.0,
                         "forward_passes": 3, "pathology": None, "finish": "stop"})
    return recs


@pytest.fixture(scope="module")
def run() -> tuple[dict, list[dict]]:
    records = (_records("ar", True) + _records("ssbd-b0.2", False)
               + _records("ssbd-b0.2+drafters", False))
    return summarize(records, [], None), records


def _lines_with_data(ax: Axes) -> list:
    """Plotted series, not reference lines (``axhline`` spans the axes in axes units)."""
    return [ln for ln in ax.get_lines() if ln.get_linestyle() != "--"
            and ln.get_label() != "_nolegend_" and len(ln.get_xdata()) > 0]


def _texts(fig: Figure) -> str:
    parts = [t.get_text() for t in fig.texts]
    if fig._suptitle is not None:
        parts.append(fig._suptitle.get_text())
    for ax in fig.axes:
        parts += [ax.get_title()] + [t.get_text() for t in ax.texts]
    return "\n".join(parts)


def _y_from_zero_or_said(ax: Axes) -> None:
    assert ax.get_ylim()[0] == 0 or "not from 0" in ax.get_ylabel() \
        or "below 0" in ax.get_ylabel()


def _check(fig: Figure) -> None:
    text = _texts(fig)
    assert "n = 3 streams" in text and "flores" in text and "en→de" in text
    for ax in fig.axes:
        _y_from_zero_or_said(ax)
        marked = [ln for ln in _lines_with_data(ax) if ln.get_marker() not in (None, "None")]
        assert marked or ax.collections, "every data point marked"
        for ln in _lines_with_data(ax):
            if ln.get_linestyle() not in ("None", ""):
                continue
            assert ln.get_marker() not in (None, "None", "")


def test_report_writes_one_figure_per_question(run, tmp_path) -> None:
    summary, records = run
    made = write_plots(summary, records, tmp_path)
    names = sorted(p.name for p in made)
    assert names == ["beta_flores_de.png", "flicker_flores_de.png", "policy_flores_de.png",
                     "time_flores_de.png"]
    assert all(p.stat().st_size > 1000 for p in made)


def test_summary_rows_carry_the_parsed_method(run) -> None:
    summary, _ = run
    assert summary["flores|de|ar"]["beta"] is None
    assert summary["flores|de|ssbd-b0.2+drafters"]["beta"] == 0.2
    assert summary["flores|de|ssbd-b0.2+drafters"]["flags"] == ["drafters"]
    assert summary["flores|de|ssbd-b0.2"]["speedup"] == pytest.approx(1.0)


def test_quality_vs_beta_with_one_beta(run) -> None:
    summary, _ = run
    fig = plots.quality_vs_beta(list(summary.values()), "flores", "de")
    assert fig is not None
    _check(fig)
    ax = fig.axes[0]
    series = _lines_with_data(ax)
    assert {ln.get_label() for ln in series} == {"SSBD", "SSBD+drafters"}
    assert all(ln.get_marker() == "o" for ln in series)
    assert ax.get_xlim()[0] == 0 and ax.get_ylim() == (0, 105)
    ar = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(ar) == 1 and ar[0].get_label().startswith("AR")
    # no beta at all: no figure
    assert plots.quality_vs_beta([summary["flores|de|ar"]], "flores", "de") is None


def test_flicker_vs_latency_and_time_per_update(run) -> None:
    summary, records = run
    rows = list(summary.values())
    fig = plots.flicker_vs_latency(rows, "flores", "de")
    _check(fig)
    for ax in fig.axes:
        assert ax.get_xlim()[0] == 0
        assert sum(len(c.get_offsets()) for c in ax.collections) == 3  # a point per method
    fig = plots.time_per_update(rows, records, "flores", "de")
    _check(fig)
    (ax,) = fig.axes
    assert "ms per update" in ax.get_ylabel()
    (p95,) = [ln for ln in ax.get_lines() if ln.get_label() == "whole update, p95"]
    assert p95.get_marker() == "D" and len(p95.get_xdata()) == 3


def test_policy_frontier_and_display_figure(run) -> None:
    summary, _ = run
    fig = plots.policy_frontier(list(summary.values()), "flores", "de")
    _check(fig)
    rows = [{"dataset": "flores", "lang": "de", "method": m, "mode": mode, "k": k,
             "streams": 3, "NE_display": ne, "first_display_s_mean": lat,
             "first_display_ca_s_mean": lat + 0.5}
            for m, mode, k, ne, lat in (("ar", "mask-k", 3, 0.1, 1.0),
                                        ("ar", "stable", None, 0.0, 1.5),
                                        ("ssbd-b0.2", "stable", None, 0.0, -0.2))]
    fig = plots.display_flicker_vs_latency(rows, "flores", "de")
    _check(fig)
    left = fig.axes[0]
    assert left.get_xlim()[0] < 0 and "below 0" in left.get_xlabel()  # a negative delay


def test_titles_name_the_source_language_of_the_records(run) -> None:
    """Old records (no ``source_lang``) were English; a German-source run says German."""
    summary, records = run
    assert "en→de" in _texts(plots.flicker_vs_latency(list(summary.values()), "flores", "de"))
    german = summarize([{**r, "source_lang": "de"} for r in records], [], None)
    fig = plots.flicker_vs_latency(list(german.values()), "flores", "de")
    assert "de→de" in _texts(fig) and "en→de" not in _texts(fig)


def test_models_compared_get_one_figure_and_stay_out_of_the_base_figures(tmp_path) -> None:
    records = (_records("ar", True) + _records("ssbd-b0.2", False)
               + _records("ar@trim", True) + _records("ssbd-b0.2@trim", False))
    for r in records:
        if r["method"].endswith("@trim"):
            r["decode_ms"] /= 2  # the trimmed model: twice as fast
    summary = summarize(records, [], None)
    assert summary["flores|de|ar@trim"]["model"] == "trim"
    assert summary["flores|de|ar@trim"]["speedup"] == pytest.approx(2.0)  # against base AR
    assert summary["flores|de|ar"]["speedup"] == 1.0
    fig = plots.model_tradeoff({("flores", "de"): list(summary.values())})
    assert fig is not None
    _check(fig)
    legend = " ".join(t.get_text() for leg in fig.legends for t in leg.get_texts())
    assert "base" in legend and "trim" in legend and "SSBD" in legend
    names = [p.name for p in write_plots(summary, records, tmp_path)]
    assert "models.png" in names
    base_only = plots.quality_vs_beta([r for r in summary.values() if not r["model"]],
                                      "flores", "de")
    assert base_only is not None


def test_no_model_figure_without_compared_models(run) -> None:
    summary, _ = run
    groups = {("flores", "de"): list(summary.values())}
    assert plots.model_tradeoff(groups) is None
