"""From per-update records to the seeds' tables and plots.

Everything here reads ``records.jsonl`` only, so tables can be recomputed (other mask-k
values, other metrics) without running the model again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from app.translation.prompts import direction
from eval import plots as figures
from eval.methods import display_texts, parse_method
from eval.metrics.acceptance import acceptance
from eval.metrics.comet import Comet
from eval.metrics.erasure import NormalizedErasure, ne_unit
from eval.metrics.latency import LAAL
from eval.metrics.quality import Bleu, ChrF, paired_chrf_difference
from eval.metrics.speed import final_caption_ms, speed, speedup
from eval.metrics.terms import TermAccuracy
from eval.tables import Block, Table


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
    from app.translation.pathology import diagnose

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
        total.merge(DraftStats.from_dict(r.get("drafts")))
    return total.as_dict()


def _stream_key(sid: str) -> tuple[int, str]:
    return (int(sid), sid) if sid.isdigit() else (1 << 30, sid)


def is_baseline(row: dict) -> bool:
    """AR on the run's own model as the baseline: no draft, no flags (``ar+retry`` is a
    variant, not it), no ``@model`` label (a compared model's AR is measured against it)."""
    return row["beta"] is None and not row["flags"] and not row.get("model")


def summarize(records: list[dict], mask_ks: list[int], detokenize: Callable | None,
              comet_checkpoint: Path | None = None) -> dict:
    """Metrics per (dataset, lang, method), with speedups against AR of the same run.

    Each row carries its method's ``beta`` and ``flags`` (parsed from the name once, by
    ``eval.methods.parse_method``) and the signature of every metric in it."""
    streams = by_stream(records)
    grouped: dict[tuple[str, str, str], list[list[dict]]] = defaultdict(list)
    for (dataset, lang, method, _), recs in sorted(streams.items()):
        if recs[-1]["final"]:
            grouped[(dataset, lang, method)].append(recs)
    comet = Comet(comet_checkpoint)
    out: dict = {}
    for (dataset, lang, method), stream_list in grouped.items():
        unit = ne_unit(lang)
        parsed = parse_method(method)
        ne, laal, chrf, bleu = NormalizedErasure(unit), LAAL(unit), ChrF(), Bleu(lang)
        ne_shown = {k: NormalizedErasure(unit, display="mask-k", display_k=k) for k in mask_ks}
        flat = [r for recs in stream_list for r in recs]
        finals = [recs[-1]["text"] for recs in stream_list]
        refs = [recs[-1].get("reference") or "" for recs in stream_list]
        sources = [recs[-1]["source"] for recs in stream_list]
        outputs = [[r["text"] for r in recs] for recs in stream_list]
        row = {
            "dataset": dataset, "lang": lang, "method": method,
            # records written before the harness stored it were all English sources
            "source_lang": flat[0].get("source_lang", "en"),
            "beta": parsed.beta, "flags": list(parsed.flags), "model": parsed.model,
            "streams": len(stream_list),
            "updates": len(flat), "ne_unit": unit,
            "NE": ne.corpus_score(outputs).score,
            **acceptance(flat), **speed(flat), **final_caption_ms(stream_list),
            "forward_passes": sum(r["forward_passes"] for r in flat),
            "chrF": chrf.corpus_score(finals, refs).score if all(refs) else None,
            "BLEU": bleu.corpus_score(finals, refs).score if all(refs) else None,
            "LAAL": laal.corpus_score(outputs, [[r["read"] for r in recs]
                                                for recs in stream_list],
                                      [recs[-1].get("reference") for recs in stream_list]
                                      ).score,
            "final_words": sum(len(f.split()) for f in finals),
            **talk_metrics(stream_list),
            **pathology_counts(stream_list),
            "drafts": draft_totals(flat),
        }
        if detokenize is not None and all("token_ids" in r for r in flat):
            for k, metric in ne_shown.items():
                shown = [display_texts(recs, k, detokenize) for recs in stream_list]
                row[f"NE_display_k{k}"] = metric.corpus_score(shown).score
        scored = comet.corpus_score(sources, finals, refs) if all(refs) else None
        row["COMET"] = scored.score if scored else None
        row["COMET_note"] = scored.note if scored else "no references"
        row["signatures"] = {
            "NE": ne.signature, "NE_display": [m.signature for m in ne_shown.values()],
            "chrF": chrf.signature, "BLEU": bleu.signature, "LAAL": laal.signature,
            "COMET": comet.signature,
        }
        out[f"{dataset}|{lang}|{method}"] = row
    for row in out.values():
        ar = next((r for r in out.values() if (r["dataset"], r["lang"]) ==
                   (row["dataset"], row["lang"]) and is_baseline(r)), None)
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


def _groups(summary: dict) -> list[tuple[str, str]]:
    return sorted({(r["dataset"], r["lang"]) for r in summary.values()})


def talk_metrics(stream_list: list[list[dict]]) -> dict:
    """Whole-talk figures of one method: term accuracy of its finals (over the terms the
    run's glossary applies to them), its context and glossary use, and the mean prompt
    length per update (what context and terms cost the prefill)."""
    finals = [recs[-1] for recs in stream_list]
    scored = [(r["source"], r["text"], r["terms"]) for r in finals if r.get("terms")]
    terms = TermAccuracy()
    score = terms.corpus_score(scored)
    prompts = [r["prompt_tokens"] for recs in stream_list for r in recs if "prompt_tokens" in r]
    return {
        "term_accuracy": score.score, "term_note": score.note, "term_signature": terms.signature,
        "context": finals[0].get("context"), "glossary_used": finals[0].get("glossary_used"),
        "prompt_tokens_mean": sum(prompts) / len(prompts) if prompts else None,
    }


def talk_base(group: list[dict]) -> dict | None:
    """The row every other is compared with in the whole-talks table: SSBD with neither
    context nor the glossary (else AR without them)."""
    plain = [r for r in group if not r.get("context") and not r.get("glossary_used")
             and not r.get("model")]
    return next((r for r in plain if r["beta"] is not None), plain[0] if plain else None)


def final_texts(records: list[dict], lang: str, method: str) -> dict[str, tuple[str, str]]:
    """stream -> (final text, reference) of one method."""
    return {r["stream"]: (r["text"], r.get("reference") or "") for r in records
            if r["final"] and r["lang"] == lang and r["method"] == method}


def whole_talks(summary: dict, records: list[dict]) -> list[Block]:
    """Context and glossaries side by side: quality (with chrF's paired-bootstrap
    difference against the plain method), term accuracy, speed and prompt length per
    method (only for runs that used either)."""
    rows = [r for r in summary.values() if r.get("context") or r.get("glossary_used")
            or r.get("term_accuracy") is not None]
    if not rows:
        return []
    blocks: list[Block] = []
    for lang in sorted({r["lang"] for r in rows}):
        group = [r for r in summary.values() if r["lang"] == lang]
        base = talk_base(group)
        t = Table(["Method", "context", "glossary", "chrF",
                   f"chrF Δ vs {base['method'] if base else '-'} [95% CI]", "term accuracy",
                   "decode s", "Speedup", "prompt tokens / update", "pathological finals"],
                  title=direction(group[0]["source_lang"], lang))
        base_finals = final_texts(records, lang, base["method"]) if base else {}
        for r in group:
            acc = r.get("term_accuracy")
            t.add(r["method"], r.get("context") or 0, "yes" if r.get("glossary_used") else "no",
                  _fmt(r["chrF"]), "-" if r is base else _delta_cell(
                      base_finals, final_texts(records, lang, r["method"])),
                  "-" if acc is None else f"{acc:.3f} ({r['term_note']})",
                  f"{r['decode_s']:.1f}", _fmt(r["speedup"]),
                  _fmt(r.get("prompt_tokens_mean")), pathology_cell(r))
        blocks.append(t)
    sig = next((r["term_signature"] for r in rows if r.get("term_signature")), None)
    if sig:
        blocks.append(f"\nSignature: {sig}")
    return blocks


def _delta_cell(base: dict[str, tuple[str, str]], other: dict[str, tuple[str, str]]) -> str:
    """chrF(other) - chrF(base) over the streams both finished, with its interval."""
    common = sorted(set(base) & set(other), key=_stream_key)
    refs = [base[s][1] for s in common]
    if not common or not all(refs):
        return "-"
    delta, low, high = paired_chrf_difference([base[s][0] for s in common],
                                              [other[s][0] for s in common], refs)
    return f"{delta:+.1f} [{low:+.1f}, {high:+.1f}]"


def table2(summary: dict, mask_k: int) -> list[Block]:
    """SSBD Table 2 layout: per language, Dataset / Method / quality / NE / A/D / A/O / TPS."""
    blocks: list[Block] = []
    for lang in sorted({r["lang"] for r in summary.values()}):
        rows = [r for r in summary.values() if r["lang"] == lang]
        t = Table(["Dataset", "Method", "COMET", "chrF", "NE", f"NE (display k={mask_k})",
                   "A/D", "A/O", "Output TPS", "decode s", "Speedup", "LAAL",
                   "final ms p50/p95", "pathological finals"],
                  title=direction(rows[0]["source_lang"], lang))
        for r in rows:
            t.add(r["dataset"], r["method"], _fmt(r["COMET"]), _fmt(r["chrF"]), _fmt(r["NE"]),
                  _fmt(r.get(f"NE_display_k{mask_k}")), _fmt(r["A/D"], True),
                  _fmt(r["A/O"], True), f"{r['tokens_per_s']:.1f}", f"{r['decode_s']:.1f}",
                  _fmt(r["speedup"]), _fmt(r["LAAL"]),
                  f"{_ms(r.get('final_ms_p50'))}/{_ms(r.get('final_ms_p95'))}",
                  pathology_cell(r))
        blocks.append(t)
    notes = sorted({r["COMET_note"] for r in summary.values() if r["COMET"] is None})
    sigs = sorted({(r["lang"], r["signatures"]["NE"], r["signatures"]["chrF"])
                   for r in summary.values()})
    blocks.append("\nSignatures: " + "; ".join(f"{lang}: {ne}, {chrf}"
                                                for lang, ne, chrf in sigs))
    if notes:
        blocks.append("COMET: " + "; ".join(notes))
    return blocks


def _sweep_row(t: Table, label: str, r: dict, ne: float | None = None) -> None:
    t.add(label, _fmt(r["COMET"]), _fmt(r["chrF"]), _fmt(r["NE"] if ne is None else ne),
          _fmt(r["A/D"], True), _fmt(r["A/O"], True), _fmt(r["speedup"]))


def table3(summary: dict) -> list[Block]:
    """Beta sweep (SSBD Table 3): one row per beta of plain SSBD (no flags), plus AR."""
    blocks: list[Block] = []
    for dataset, lang in _groups(summary):
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)
                and not r["flags"] and not r.get("model")]
        if len(rows) < 3:
            continue
        rows.sort(key=lambda r: -1.0 if r["beta"] is None else r["beta"])
        t = Table(["beta", "COMET", "chrF", "NE", "A/D", "A/O", "Speedup"],
                  title=f"{dataset} {direction(rows[0]['source_lang'], lang)}: effect of beta")
        for r in rows:
            _sweep_row(t, "AR" if r["beta"] is None else f"{r['beta']:g}", r)
        blocks.append(t)
    return blocks


def table4(summary: dict, mask_ks: list[int], base: str) -> list[Block]:
    """mask-k (SSBD Table 4): draft mask-k rows vs display-only mask-k rows."""
    blocks: list[Block] = []
    for dataset, lang in _groups(summary):
        ref = summary.get(f"{dataset}|{lang}|{base}")
        if ref is None:
            continue
        t = Table(["k", "COMET", "chrF", "NE", "A/D", "A/O", "Speedup"],
                  title=f"{dataset} {direction(ref['source_lang'], lang)}: mask-k (base {base})")
        _sweep_row(t, "-", ref)
        t.add("**+mask-k (draft)**", *[""] * 6)
        for k in mask_ks:
            r = summary.get(f"{dataset}|{lang}|{base}+draftmask{k}")
            if r is not None:
                _sweep_row(t, str(k), r, r.get(f"NE_display_k{k}", r["NE"]))
        t.add("**+display-only mask-k**", *[""] * 6)
        for k in mask_ks:
            _sweep_row(t, str(k), ref, ref.get(f"NE_display_k{k}"))
        blocks.append(t)
    return blocks


def plots(summary: dict, records: list[dict], out_dir: Path) -> list[Path]:
    """Per (dataset, lang): quality vs beta, flicker vs latency, time per update and the
    final policies' frontier, as PNGs (``eval.plots``; a figure its data cannot answer is
    left out); with ``--compare-model`` runs, ``models.png`` (every model, every group)."""
    made = []
    for dataset, lang in _groups(summary):
        # one model's figures: the base model's rows (compared models: ``model_tradeoff``)
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)
                and not r.get("model")]
        for stem, fig in (
                ("beta", figures.quality_vs_beta(rows, dataset, lang)),
                ("flicker", figures.flicker_vs_latency(rows, dataset, lang)),
                ("time", figures.time_per_update(rows, records, dataset, lang)),
                ("policy", figures.policy_frontier(rows, dataset, lang))):
            if fig is not None:
                made.append(figures.save(fig, out_dir / f"{stem}_{dataset}_{lang}.png"))
    groups = {g: [r for r in summary.values() if (r["dataset"], r["lang"]) == g]
              for g in _groups(summary)}
    fig = figures.model_tradeoff(groups)
    if fig is not None:
        made.append(figures.save(fig, out_dir / "models.png"))
    return made


def model_comparison(summary: dict, records: list[dict]) -> list[Block]:
    """Each compared model (``METHOD@NAME``) against the base model's same method, on the
    same streams: speed ratio, chrF difference with a 95% paired-bootstrap interval,
    identical finals, pathological finals and NE, per dataset and language."""
    from eval.metrics.quality import paired_chrf_difference

    streams = by_stream(records)
    blocks: list[Block] = []
    for dataset, lang in _groups(summary):
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)]
        compared = [r for r in rows if r.get("model")]
        if not compared:
            continue
        t = Table(["Method", "Model", "decode s (base / model)", "Speedup over base",
                   "chrF base / model", "chrF diff [95% CI]", "identical finals",
                   "pathological base / model", "NE base / model"],
                  title=f"{dataset} {direction(rows[0]['source_lang'], lang)}: "
                        "models compared on the same streams")
        for r in compared:
            base_name = r["method"].rsplit("@", 1)[0]
            base = summary.get(f"{dataset}|{lang}|{base_name}")
            if base is None:
                continue
            finals_a, finals_b, refs = [], [], []
            for (d, lg, method, sid), recs in streams.items():
                if (d, lg, method) != (dataset, lang, base_name) or not recs[-1]["final"]:
                    continue
                other = streams.get((d, lg, r["method"], sid))
                if other and other[-1]["final"]:
                    finals_a.append(recs[-1]["text"])
                    finals_b.append(other[-1]["text"])
                    refs.append(recs[-1].get("reference") or "")
            ci = "-"
            if finals_a and all(refs):
                delta, low, high = paired_chrf_difference(finals_a, finals_b, refs)
                ci = f"{delta:+.1f} [{low:+.1f}, {high:+.1f}]"
            same = sum(a == b for a, b in zip(finals_a, finals_b, strict=True))
            t.add(base_name, r["model"], f"{base['decode_s']:.1f} / {r['decode_s']:.1f}",
                  _fmt(base["decode_s"] / r["decode_s"] if r["decode_s"] else None),
                  f"{_fmt(base['chrF'])} / {_fmt(r['chrF'])}", ci,
                  f"{same}/{len(finals_a)}",
                  f"{base.get('pathological_finals', 0)} / {r.get('pathological_finals', 0)}",
                  f"{_fmt(base['NE'])} / {_fmt(r['NE'])}")
        blocks.append(t)
    return blocks

