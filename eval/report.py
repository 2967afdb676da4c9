"""From per-update records to the seeds' tables and plots.

Everything here reads ``records.jsonl`` only, so tables can be recomputed (other mask-k
values, other metrics) without running the model again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from eval.metrics.acceptance import acceptance
from eval.metrics.comet import comet_score
from eval.metrics.erasure import ne_signature, ne_unit, normalized_erasure, units
from eval.metrics.latency import laal, laal_signature, mean_laal
from eval.metrics.quality import bleu_score, bleu_signature, chrf_score, chrf_signature
from eval.metrics.speed import final_caption_ms, speed, speedup

Group = tuple[str, str]  # (dataset, lang)


def load_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def by_stream(records: list[dict]) -> dict[tuple, list[dict]]:
    streams: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        streams[(r["dataset"], r["lang"], r["method"], r["stream"])].append(r)
    for recs in streams.values():
        recs.sort(key=lambda r: r["update"])
    return streams


def record_pathology(r: dict) -> str | None:
    """The pathology of one record's output: recorded at run time (with the prompt's
    examples), or diagnosed here for records written before it was (no example check)."""
    if "pathology" in r:
        return r["pathology"]
    from app.pathology import diagnose

    return diagnose(r["text"], r["source"], r["lang"], runaway=r.get("finish") == "length")


def pathology_counts(stream_list: list[list[dict]]) -> dict:
    """Pathological finals by kind, with their stream ids, and the rate among partials."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for recs in stream_list:
        kind = record_pathology(recs[-1])
        if kind:
            by_kind[kind].append(str(recs[-1]["stream"]))
    partials = [r for recs in stream_list for r in recs[:-1]]
    bad_partials = sum(1 for r in partials if record_pathology(r))
    return {
        "pathological_finals": sum(len(v) for v in by_kind.values()),
        "pathological_by_kind": {k: sorted(v, key=_stream_key) for k, v in
                                 sorted(by_kind.items())},
        "pathological_partials": bad_partials,
        "partials": len(partials),
        "retried_finals": sum(1 for recs in stream_list if recs[-1].get("retried")),
        "retry_ms": sum(recs[-1].get("retry_ms", 0.0) for recs in stream_list),
        "drafts_dropped": sum(1 for recs in stream_list for r in recs
                              if r.get("draft_dropped") and not r["final"]),
    }


def draft_totals(records: list[dict]) -> dict[str, dict[str, int]]:
    """Proposed / accepted draft tokens by source over ``records`` (their ``drafts``, the
    ``DraftStats`` of each update; records written before it existed count nothing)."""
    from app.engine.draft_stats import DraftStats

    total = DraftStats()
    for r in records:
        drafts = r.get("drafts") or {}
        accepted = drafts.get("accepted", {})
        for name, n in drafts.get("proposed", {}).items():
            total.add(name, n, accepted.get(name, 0))
    return total.as_dict()


def _stream_key(sid: str) -> tuple[int, str]:
    return (int(sid), sid) if sid.isdigit() else (1 << 30, sid)


def summarize(records: list[dict], mask_ks: list[int], detokenize: Callable | None,
              comet_checkpoint: Path | None = None) -> dict:
    """Metrics per (dataset, lang, method), with speedups against ``ar`` of the same run."""
    from eval.methods import display_texts

    streams = by_stream(records)
    grouped: dict[tuple[str, str, str], list[list[dict]]] = defaultdict(list)
    for (dataset, lang, method, _), recs in sorted(streams.items()):
        if recs[-1]["final"]:
            grouped[(dataset, lang, method)].append(recs)
    out: dict = {}
    for (dataset, lang, method), stream_list in grouped.items():
        unit = ne_unit(lang)
        flat = [r for recs in stream_list for r in recs]
        finals = [recs[-1]["text"] for recs in stream_list]
        refs = [recs[-1].get("reference") or "" for recs in stream_list]
        sources = [recs[-1]["source"] for recs in stream_list]
        outputs = [[r["text"] for r in recs] for recs in stream_list]
        row = {
            "dataset": dataset, "lang": lang, "method": method, "streams": len(stream_list),
            "updates": len(flat), "ne_unit": unit,
            "NE": normalized_erasure(outputs, unit),
            **acceptance(flat), **speed(flat), **final_caption_ms(stream_list),
            "forward_passes": sum(r["forward_passes"] for r in flat),
            "chrF": chrf_score(finals, refs) if all(refs) else None,
            "BLEU": bleu_score(finals, refs, lang) if all(refs) else None,
            # target "words" in the NE unit: whitespace words would make a whole zh/ja
            # sentence one word
            "LAAL": mean_laal([
                laal([units(r["text"], unit) for r in recs], [r["read"] for r in recs],
                     recs[-1]["read"], len(units(recs[-1].get("reference") or "", unit))
                     or None)
                for recs in stream_list]),
            "final_words": sum(len(f.split()) for f in finals),
            **pathology_counts(stream_list),
            "drafts": draft_totals(flat),
        }
        if detokenize is not None and all("token_ids" in r for r in flat):
            for k in mask_ks:
                shown = [display_texts(recs, k, detokenize) for recs in stream_list]
                row[f"NE_display_k{k}"] = normalized_erasure(shown, unit)
        comet = comet_score(sources, finals, refs, comet_checkpoint) if all(refs) else None
        row["COMET"] = comet.score if comet else None
        row["COMET_note"] = comet.reason if comet else "no references"
        row["signatures"] = {
            "NE": ne_signature(unit), "NE_display": [ne_signature(unit, k) for k in mask_ks],
            "chrF": chrf_signature(), "BLEU": bleu_signature(lang),
            "LAAL": laal_signature(target_unit=unit),
            "COMET": comet.signature if comet else None,
        }
        out[f"{dataset}|{lang}|{method}"] = row
    for row in out.values():
        ar = out.get(f"{row['dataset']}|{row['lang']}|ar")
        row["speedup"] = speedup(row["decode_s"], ar["decode_s"]) if ar else None
    return out


def _fmt(v, pct: bool = False) -> str:  # noqa: ANN001
    if v is None:
        return "-"
    if pct:
        return f"{v:.1%}"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _ms(v) -> str:  # noqa: ANN001
    return "-" if v is None else f"{v:.0f}"


def pathology_cell(r: dict) -> str:
    """``3/60 (copy 2, wrong_script 1)``: pathological finals of a row, by kind."""
    kinds = ", ".join(f"{k} {len(v)}" for k, v in r.get("pathological_by_kind", {}).items())
    cell = f"{r.get('pathological_finals', 0)}/{r['streams']}"
    return f"{cell} ({kinds})" if kinds else cell


def pathology_listing(summary: dict) -> str:
    """Every pathological final with its stream id, so that no average hides one."""
    lines = []
    for r in summary.values():
        if r.get("retried_finals"):
            lines.append(f"- {r['dataset']} {r['lang']} {r['method']}: {r['retried_finals']} "
                         f"pathological finals retried from scratch, "
                         f"{r['retry_ms'] / 1000:.1f} s of {r['decode_s']:.1f} s decode time")
        for kind, ids in r.get("pathological_by_kind", {}).items():
            lines.append(f"- {r['dataset']} {r['lang']} {r['method']}: {kind} in streams "
                         + ", ".join(ids))
    return "\n".join(lines) if lines else "none"


def table2(summary: dict, mask_k: int) -> str:
    """SSBD Table 2 layout: per language, Dataset / Method / quality / NE / A/D / A/O / TPS."""
    lines = []
    for lang in sorted({r["lang"] for r in summary.values()}):
        lines.append(f"\n**English→{lang}**\n")
        lines.append(f"| Dataset | Method | COMET | chrF | NE | NE (display k={mask_k}) | A/D |"
                     " A/O | Output TPS | decode s | Speedup | LAAL | final ms p50/p95 |"
                     " pathological finals |")
        lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in summary.values():
            if r["lang"] != lang:
                continue
            lines.append(
                f"| {r['dataset']} | {r['method']} | {_fmt(r['COMET'])} | {_fmt(r['chrF'])} | "
                f"{_fmt(r['NE'])} | {_fmt(r.get(f'NE_display_k{mask_k}'))} | "
                f"{_fmt(r['A/D'], True)} | {_fmt(r['A/O'], True)} | "
                f"{r['tokens_per_s']:.1f} | {r['decode_s']:.1f} | {_fmt(r['speedup'])} | "
                f"{_fmt(r['LAAL'])} | {_ms(r.get('final_ms_p50'))}/{_ms(r.get('final_ms_p95'))} | "
                f"{pathology_cell(r)} |")
    notes = sorted({r["COMET_note"] for r in summary.values() if r["COMET"] is None})
    sigs = sorted({(r["lang"], r["signatures"]["NE"], r["signatures"]["chrF"])
                   for r in summary.values()})
    lines.append("\nSignatures: " + "; ".join(f"{lang}: {ne}, {chrf}" for lang, ne, chrf in sigs))
    if notes:
        lines.append("COMET: " + "; ".join(notes))
    return "\n".join(lines)


def table3(summary: dict) -> str:
    """Beta sweep (SSBD Table 3): one row per beta, plus AR."""
    lines = []
    for dataset, lang in sorted({(r["dataset"], r["lang"]) for r in summary.values()}):
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)
                and (r["method"] == "ar" or ("+" not in r["method"]
                                             and r["method"].startswith("ssbd-b")))]
        if len(rows) < 3:
            continue
        rows.sort(key=lambda r: -1.0 if r["method"] == "ar" else float(r["method"][6:]))
        lines.append(f"\n**{dataset} English→{lang}: effect of beta**\n")
        lines.append("| beta | COMET | chrF | NE | A/D | A/O | Speedup |")
        lines.append("|---|---|---|---|---|---|---|")
        for r in rows:
            beta = "AR" if r["method"] == "ar" else r["method"][6:]
            lines.append(f"| {beta} | {_fmt(r['COMET'])} | {_fmt(r['chrF'])} | {_fmt(r['NE'])} "
                         f"| {_fmt(r['A/D'], True)} | {_fmt(r['A/O'], True)} | "
                         f"{_fmt(r['speedup'])} |")
    return "\n".join(lines)


def table4(summary: dict, mask_ks: list[int], base: str) -> str:
    """mask-k (SSBD Table 4): draft mask-k rows vs display-only mask-k rows."""
    lines = []
    for dataset, lang in sorted({(r["dataset"], r["lang"]) for r in summary.values()}):
        ref = summary.get(f"{dataset}|{lang}|{base}")
        if ref is None:
            continue
        lines.append(f"\n**{dataset} English→{lang}: mask-k (base {base})**\n")
        lines.append("| k | COMET | chrF | NE | A/D | A/O | Speedup |")
        lines.append("|---|---|---|---|---|---|---|")

        def row(label: str, r: dict, ne) -> str:  # noqa: ANN001
            return (f"| {label} | {_fmt(r['COMET'])} | {_fmt(r['chrF'])} | {_fmt(ne)} | "
                    f"{_fmt(r['A/D'], True)} | {_fmt(r['A/O'], True)} | {_fmt(r['speedup'])} |")

        lines.append(row("-", ref, ref["NE"]))
        lines.append("| **+mask-k (draft)** | | | | | | |")
        for k in mask_ks:
            r = summary.get(f"{dataset}|{lang}|{base}+draftmask{k}")
            if r is not None:
                lines.append(row(str(k), r, r.get(f"NE_display_k{k}", r["NE"])))
        lines.append("| **+display-only mask-k** | | | | | | |")
        for k in mask_ks:
            lines.append(row(str(k), ref, ref.get(f"NE_display_k{k}")))
    return "\n".join(lines)


def plots(summary: dict, records: list[dict], out_dir: Path) -> list[Path]:
    """beta vs quality / NE / speedup, and the per-update time breakdown, as PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for dataset, lang in sorted({(r["dataset"], r["lang"]) for r in summary.values()}):
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)]
        sweep = sorted((float(r["method"][6:]), r) for r in rows
                       if r["method"].startswith("ssbd-b") and "+" not in r["method"])
        ar = next((r for r in rows if r["method"] == "ar"), None)
        if len(sweep) >= 2:
            fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
            betas = [b for b, _ in sweep]
            quality = "COMET" if all(r["COMET"] is not None for _, r in sweep) else "chrF"
            for ax, key, label in zip(axes, [quality, "NE", "speedup"],
                                      [quality, "normalized erasure", "speedup over AR"],
                                      strict=True):
                ax.plot(betas, [r[key] for _, r in sweep], marker="o", label="SSBD")
                if ar is not None and ar.get(key) is not None:
                    ax.axhline(ar[key], color="gray", linestyle="--", label="AR")
                ax.set_xlabel("beta")
                ax.set_title(label)
                ax.grid(alpha=0.3)
            axes[0].legend()
            fig.suptitle(f"{dataset} en→{lang}")
            fig.tight_layout()
            path = out_dir / f"beta_{dataset}_{lang}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            made.append(path)
        policy = policy_frontier(rows, dataset, lang, out_dir, plt)
        if policy is not None:
            made.append(policy)
        # time breakdown per update: first pass (prompt suffix + draft) vs decoding
        methods = [r["method"] for r in rows]
        first = []
        rest = []
        for m in methods:
            recs = [x for x in records if (x["dataset"], x["lang"], x["method"]) ==
                    (dataset, lang, m)]
            n = max(1, len(recs))
            first.append(sum(x["prompt_ms"] for x in recs) / n)
            rest.append(sum(x["decode_ms"] - x["prompt_ms"] for x in recs) / n)
        fig, ax = plt.subplots(figsize=(max(5, 1.3 * len(methods)), 3.6))
        ax.bar(methods, first, label="first pass (prompt suffix + draft)")
        ax.bar(methods, rest, bottom=first, label="decoding after it")
        ax.set_ylabel("ms per update")
        ax.set_title(f"{dataset} en→{lang}: where the time goes")
        ax.legend(fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
        fig.tight_layout()
        path = out_dir / f"time_{dataset}_{lang}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def policy_frontier(rows: list[dict], dataset: str, lang: str, out_dir: Path,
                    plt) -> Path | None:  # noqa: ANN001 - matplotlib.pyplot
    """Speedup against pathological finals and against chrF of finals, one point per method:
    the trade-off each final policy makes, where an average over sentences would hide it."""
    pts = [r for r in rows if r.get("speedup") is not None and r.get("chrF") is not None]
    if len(pts) < 2:
        return None
    n = max(r["streams"] for r in pts)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, key, label in ((axes[0], "pathological_finals", "pathological finals (count)"),
                           (axes[1], "chrF", "chrF of finals")):
        for r in pts:
            ax.scatter(r["speedup"], r[key], s=36, zorder=3)
            ax.annotate(r["method"], (r["speedup"], r[key]), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
        ax.axvline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("speedup over AR (decode time, same run)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(bottom=0)
    axes[1].set_ylabel("chrF of finals (axis not from 0)")
    fig.suptitle(f"{dataset} en→{lang}: final policies (n = {n} streams per method)")
    fig.tight_layout()
    path = out_dir / f"policy_{dataset}_{lang}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def display_section(records: list[dict], modes: list[str], mask_ks: list[int],
                    detokenize: Callable | None, out_dir: Path) -> str:
    """Display policies (``eval/display_eval.py``): one table per mode, flicker vs latency
    plot; writes ``display.md`` and ``display_summary.json`` into ``out_dir`` and returns
    the markdown for ``tables.md``. The hook for the harness's ``--display-modes``."""
    from eval.display_eval import display_report

    return display_report(records, modes, mask_ks, detokenize, out_dir)
