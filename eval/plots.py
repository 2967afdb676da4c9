"""The eval's figures, one question each, built so that a reader can trust them.

Every figure here marks each data point, starts its value axes at zero (or says in the
axis label that it does not), writes the sample size on the plot and names the dataset
and language in its title. Functions return a ``matplotlib.figure.Figure`` (or None when
the data cannot answer the question) so that tests can inspect the axes; ``save`` writes
one with the Agg canvas, so no display and no pyplot state are involved.

* ``quality_vs_beta``: chrF (and COMET when computed) of finals against SSBD's beta, AR as
  a reference line;
* ``flicker_vs_latency``: normalized erasure against LAAL and against the final's delay,
  one point per method;
* ``time_per_update``: milliseconds per update by method, first pass and decoding, p95
  marked;
* ``policy_frontier``: speedup against pathological finals and chrF, one point per method;
* ``display_flicker_vs_latency``: display NE against the time to first display, one point
  per method and display policy;
* ``model_tradeoff``: chrF against speedup, one colour per model (``--compare-model``), one
  panel per dataset and language.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from eval.metrics.speed import percentile


def save(fig: Figure, path: Path, dpi: int = 110) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=dpi)
    return path


def _figure(ncols: int, width: float, height: float) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _sample_note(ax: Axes, n: int, what: str = "streams") -> None:
    """``n = 20 streams per point`` in the corner of the axes, where it cannot be missed."""
    ax.text(0.99, 0.02, f"n = {n} {what} per point", transform=ax.transAxes, ha="right",
            va="bottom", fontsize=8, color="dimgray")


def _from_zero(ax: Axes, axis: str, values: Sequence[float]) -> None:
    """Start ``axis`` at 0 with room above the largest value; when a value is negative,
    include 0 and say so in the label."""
    low, high = min([0.0, *values]), max([0.0, *values])
    span = (high - low) or 1.0
    limits = (low - 0.1 * span if low < 0 else 0.0, high + 0.15 * span)
    note = " (axis below 0: negative values)" if low < 0 else ""
    if axis == "x":
        ax.set_xlim(*limits)
        ax.set_xlabel(ax.get_xlabel() + note)
    else:
        ax.set_ylim(*limits)
        ax.set_ylabel(ax.get_ylabel() + note)


def _title(dataset: str, lang: str, question: str, rows: Sequence[dict]) -> str:
    source = rows[0].get("source_lang", "en") if rows else "en"
    return f"{dataset} {source}→{lang}: {question} (n = {_n(rows)} streams per method)"


def _n(rows: Sequence[dict]) -> int:
    return max(r["streams"] for r in rows)


def quality_vs_beta(rows: Sequence[dict], dataset: str, lang: str) -> Figure | None:
    """chrF (and COMET when computed) of finals against beta, one marked series per SSBD
    variant (its flags), AR a dashed reference line. None without any SSBD beta."""
    ssbd = [r for r in rows if r.get("beta") is not None]
    if not ssbd:
        return None
    ar = next((r for r in rows if r.get("beta") is None and not r.get("flags")), None)
    metrics = [("chrF", "chrF of finals", 100.0)]
    if any(r.get("COMET") is not None for r in rows):
        metrics.append(("COMET", "COMET of finals", 1.0))
    fig, axes = _figure(len(metrics), 5.5 * len(metrics), 4.2)
    series: dict[tuple[str, ...], list[dict]] = defaultdict(list)
    for r in ssbd:
        series[tuple(r.get("flags") or ())].append(r)
    for ax, (key, label, top) in zip(axes, metrics, strict=True):
        values = []
        for i, (flags, pts) in enumerate(sorted(series.items())):
            pts = sorted((p for p in pts if p.get(key) is not None), key=lambda p: p["beta"])
            if not pts:
                continue
            values += [p[key] for p in pts]
            ax.plot([p["beta"] for p in pts], [p[key] for p in pts], marker="o",
                    color=f"C{i % 10}", label="SSBD" + "".join(f"+{f}" for f in flags))
        if ar is not None and ar.get(key) is not None:
            ax.axhline(ar[key], color="gray", linestyle="--", label=f"AR ({ar[key]:.3g})")
            values.append(ar[key])
        ax.set_xlabel("beta")
        ax.set_ylabel(label)
        ax.set_xlim(left=0, right=max(0.5, *(r["beta"] for r in ssbd)) * 1.1)
        ax.set_ylim(bottom=0, top=max([top, *values]) * 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
        _sample_note(ax, _n(rows))
    fig.suptitle(_title(dataset, lang, "quality vs beta", rows))
    fig.tight_layout()
    return fig


def flicker_vs_latency(rows: Sequence[dict], dataset: str, lang: str) -> Figure | None:
    """NE of the full outputs against LAAL (source words) and against the final's delay
    (ms, p50), one annotated point per method. None when no method has both."""
    panels = [("LAAL", "LAAL (source words)"),
              ("final_ms_p50", "final update's delay, ms (p50)")]
    if not any(r.get("NE") is not None and r.get(k) is not None for r in rows
               for k, _ in panels):
        return None
    fig, axes = _figure(2, 11.5, 4.4)
    for ax, (key, label) in zip(axes, panels, strict=True):
        pts = [r for r in rows if r.get("NE") is not None and r.get(key) is not None]
        for i, r in enumerate(pts):
            ax.scatter(r[key], r["NE"], s=40, marker="o", color=f"C{i % 10}", zorder=3)
            ax.annotate(r["method"], (r[key], r["NE"]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        ax.set_xlabel(label)
        ax.set_ylabel(f"normalized erasure ({rows[0].get('ne_unit', 'word')} units)")
        _from_zero(ax, "x", [r[key] for r in pts])
        _from_zero(ax, "y", [r["NE"] for r in pts])
        ax.grid(alpha=0.3)
        _sample_note(ax, _n(rows))
    fig.suptitle(_title(dataset, lang, "flicker vs latency", rows))
    fig.tight_layout()
    return fig


def time_per_update(rows: Sequence[dict], records: Sequence[dict], dataset: str,
                    lang: str) -> Figure | None:
    """Mean ms per update by method, split into the first pass (prompt suffix + draft) and
    the decoding after it; a marker at the p95 of the whole update's time."""
    methods = [r["method"] for r in rows]
    by_method: dict[str, list[dict]] = defaultdict(list)
    for x in records:
        if (x["dataset"], x["lang"]) == (dataset, lang):
            by_method[x["method"]].append(x)
    if not any(by_method.get(m) for m in methods):
        return None
    first, rest, p95, updates = [], [], [], []
    for m in methods:
        recs = by_method.get(m, [])
        n = max(1, len(recs))
        first.append(sum(x.get("prompt_ms", 0.0) for x in recs) / n)
        rest.append(sum(x["decode_ms"] - x.get("prompt_ms", 0.0) for x in recs) / n)
        p95.append(percentile([x["decode_ms"] for x in recs], 95) or 0.0)
        updates.append(len(recs))
    fig, axes = _figure(1, max(6.0, 1.3 * len(methods)), 4.2)
    ax = axes[0]
    ax.bar(methods, first, label="first pass (prompt suffix + draft), mean")
    ax.bar(methods, rest, bottom=first, label="decoding after it, mean")
    ax.plot(methods, p95, linestyle="", marker="D", color="black", label="whole update, p95")
    for i, (a, b) in enumerate(zip(first, rest, strict=True)):
        ax.annotate(f"{a + b:.0f}", (i, a + b), fontsize=7, ha="center", xytext=(0, 2),
                    textcoords="offset points")
    ax.set_ylabel("ms per update")
    span = str(min(updates)) if min(updates) == max(updates) else \
        f"{min(updates)}-{max(updates)}"
    ax.set_xlabel(f"method ({span} updates each)")
    ax.set_ylim(bottom=0, top=max([1.0, *p95, *(a + b for a, b in zip(first, rest,
                                                                     strict=True))]) * 1.45)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    ax.set_title(_title(dataset, lang, "time per update", rows), fontsize=10)
    fig.tight_layout()
    return fig


def policy_frontier(rows: Sequence[dict], dataset: str, lang: str) -> Figure | None:
    """Speedup against pathological finals and against chrF of finals, one point per
    method: the trade-off each final policy makes, where an average would hide it."""
    pts = [r for r in rows if r.get("speedup") is not None and r.get("chrF") is not None]
    if len(pts) < 2:
        return None
    fig, axes = _figure(2, 12, 4.4)
    for ax, key, label in ((axes[0], "pathological_finals", "pathological finals (count)"),
                           (axes[1], "chrF", "chrF of finals")):
        for r in pts:
            ax.scatter(r["speedup"], r[key], s=36, marker="o", zorder=3)
            ax.annotate(r["method"], (r["speedup"], r[key]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
        ax.axvline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("speedup over AR (decode time, same run)")
        ax.set_ylabel(label)
        ax.set_xlim(left=0, right=max(1.0, *(r["speedup"] for r in pts)) * 1.2)
        ax.grid(alpha=0.3)
        _sample_note(ax, _n(pts))
    axes[0].set_ylim(bottom=0, top=max(1, *(r["pathological_finals"] for r in pts)) * 1.2)
    axes[1].set_ylim(bottom=0, top=105)
    fig.suptitle(_title(dataset, lang, "final policies", pts))
    fig.tight_layout()
    return fig


def display_flicker_vs_latency(rows: Sequence[dict], dataset: str, lang: str) -> Figure | None:
    """Display NE against the mean time to first display (arrival clock and
    computation-aware), one marked point per method and display policy."""
    rows = [r for r in rows if r.get("first_display_s_mean") is not None]
    if not rows:
        return None
    markers = {"mask-k": "o", "stable": "s"}
    methods = sorted({r["method"] for r in rows})
    colors = {m: f"C{i % 10}" for i, m in enumerate(methods)}
    fig, axes = _figure(2, 12, 5.2)
    for ax, key, label in ((axes[0], "first_display_s_mean", "arrival clock (policy only)"),
                           (axes[1], "first_display_ca_s_mean", "computation-aware clock")):
        for m in methods:  # a method's policies joined: its own trade-off
            pts = [r for r in rows if r["method"] == m and r.get(key) is not None]
            ax.plot([r[key] for r in pts], [r["NE_display"] for r in pts],
                    color=colors[m], linewidth=0.8, alpha=0.5)
        for r in rows:
            if r.get(key) is None:
                continue
            tag = f"k={r['k']}" if r["k"] is not None else r["mode"]
            ax.scatter(r[key], r["NE_display"], s=48, zorder=3,
                       marker=markers.get(r["mode"], "^"), color=colors[r["method"]])
            ax.annotate(tag, (r[key], r["NE_display"]), fontsize=7, xytext=(4, 3),
                        textcoords="offset points")
        ax.set_xlabel(f"mean time from source word to first display, s\n({label})")
        ax.set_ylabel("display NE (flicker)")
        _from_zero(ax, "x", [r[key] for r in rows if r.get(key) is not None])
        _from_zero(ax, "y", [r["NE_display"] for r in rows])
        ax.grid(alpha=0.3)
        _sample_note(ax, _n(rows))
    handles = [Line2D([], [], color=colors[m], marker="o", linestyle="", label=m)
               for m in methods]
    handles += [Line2D([], [], color="gray", marker=mk, linestyle="", label=mode)
                for mode, mk in markers.items()]
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=7,
               frameon=False)
    fig.suptitle(_title(dataset, lang, "flicker vs latency by display policy", rows))
    fig.tight_layout(rect=(0, 0.1 + 0.03 * (len(handles) // 4), 1, 1))
    return fig


def model_tradeoff(groups: dict[tuple[str, str], Sequence[dict]]) -> Figure | None:
    """chrF of finals against speedup over the base model's AR, one panel per (dataset,
    language), one colour per model (``--compare-model``; "base" is ``--model``), AR and
    SSBD marked apart and joined per model. None when no run compared models."""
    panels = {g: [r for r in rows if r.get("speedup") is not None and r.get("chrF") is not None]
              for g, rows in sorted(groups.items())}
    panels = {g: rows for g, rows in panels.items()
              if any(r.get("model") for r in rows)}
    if not panels:
        return None
    models = sorted({r.get("model") or "base" for rows in panels.values() for r in rows},
                    key=lambda m: (m != "base", m))
    colors = {m: f"C{i % 10}" for i, m in enumerate(models)}
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(4.4 * ncols, 3.8 * nrows + 0.8))
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    for ax, ((dataset, lang), rows) in zip(axes, panels.items(), strict=False):
        for m in models:
            pts = sorted((r for r in rows if (r.get("model") or "base") == m),
                         key=lambda r: r["speedup"])
            ax.plot([r["speedup"] for r in pts], [r["chrF"] for r in pts], color=colors[m],
                    linewidth=0.8, alpha=0.6)
            for r in pts:
                ax.scatter(r["speedup"], r["chrF"], s=44, zorder=3, color=colors[m],
                           marker="o" if r.get("beta") is None else "s")
        ax.axvline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("speedup over the base model's AR")
        ax.set_ylabel("chrF of finals")
        ax.set_xlim(left=0, right=max(1.0, *(r["speedup"] for r in rows)) * 1.15)
        ax.set_ylim(bottom=0, top=max(r["chrF"] for r in rows) * 1.25)
        ax.set_title(_title(dataset, lang, "", rows).replace(":  (", " ("), fontsize=8)
        ax.grid(alpha=0.3)
        _sample_note(ax, _n(rows))
    handles = [Line2D([], [], color=colors[m], marker="o", linestyle="", label=m)
               for m in models]
    handles += [Line2D([], [], color="gray", marker=mk, linestyle="", label=label)
                for mk, label in (("o", "AR"), ("s", "SSBD"))]
    fig.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=8,
               frameon=False)
    fig.suptitle("Models side by side: quality against speed")
    fig.tight_layout(rect=(0, 0.8 / fig.get_figheight(), 1, 0.96))
    return fig
