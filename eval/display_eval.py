"""Display policies scored on eval records: one table per display mode, flicker vs latency.

    python -m eval.display_eval --out results/flores               # reads its records.jsonl
    python -m eval.display_eval --records reports/.../records.jsonl.gz --out DIR \\
        --display-modes mask-k,stable --mask-k 3,5

Each stream of ``records.jsonl`` (what ``livetrans eval`` wrote) is replayed through each
display policy of ``app.translation.display`` (``mask-k`` per k, ``stable``), and what the viewer
saw is
scored: display NE (normalized erasure of the displays, in the unit of the eval's NE, so
it compares with the ``NE (display k=...)`` column of Table 2), units retracted between
partials (``stable`` promises 0) and by the final, the time from a source word to the first
display of its translation (``eval.metrics.display``; arrival clock and computation-aware
clock), final latency on the computation-aware clock, and chrF of finals (a policy never
changes a final, so chrF is the method's, shown for the trade-off). No model runs; the
model's vocabulary is loaded only to detokenize mask-k's token prefixes.

Writes ``display.md``, ``display_summary.json`` and ``plots/display_<dataset>_<lang>.png``
into ``--out``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from app.translation.display import DISPLAY_MODES, Translation, display_policy, display_unit
from app.usage import PlainHelp, comma_list, count
from eval.metrics.display import FirstDisplay
from eval.metrics.erasure import NormalizedErasure, ne_unit
from eval.metrics.quality import ChrF
from eval.metrics.speed import percentile
from eval.plots import display_flicker_vs_latency, save
from eval.tables import Block, Table, markdown, show

Detokenize = Callable[[Sequence[int]], str]


def read_records(path: Path) -> list[dict]:
    """``records.jsonl`` or its gzipped snapshot (``reports/*/records.jsonl.gz``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f if line.strip()]


def complete_streams(records: list[dict]) -> dict[tuple[str, str, str, str], list[dict]]:
    """Updates per (dataset, lang, method, stream), in order; streams without a final
    (an interrupted run) are left out, as in ``eval.report.summarize``."""
    streams: dict[tuple[str, str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        streams[(r["dataset"], r["lang"], r["method"], str(r["stream"]))].append(r)
    out = {}
    for key, recs in sorted(streams.items()):
        recs.sort(key=lambda r: r["update"])
        if recs[-1]["final"]:
            out[key] = recs
    return out


def policies(modes: Sequence[str], mask_ks: Sequence[int]) -> list[tuple[str, int | None]]:
    """(mode, k) pairs to score: mask-k once per k, stable once."""
    unknown = [m for m in modes if m not in DISPLAY_MODES]
    if unknown:
        raise ValueError(f"unknown display mode(s) {unknown} (choose from {DISPLAY_MODES})")
    out: list[tuple[str, int | None]] = []
    for mode in modes:
        out += [(mode, k) for k in mask_ks] if mode == "mask-k" else [(mode, None)]
    return out


def stream_displays(recs: list[dict], mode: str, k: int | None, lang: str,
                    detokenize: Detokenize | None) -> list[str]:
    """What the viewer saw at each update of one stream (one segment) under a policy."""
    policy = display_policy(mode, k or 0, unit=display_unit(lang), detokenize=detokenize)
    return policy.show_all([Translation(r["text"], bool(r["final"]), r.get("token_ids"))
                            for r in recs])


def score(stream_list: list[list[dict]], shown: list[list[str]], lang: str, word_s: float,
          policy: tuple[str, int | None] = ("mask-k", None)) -> dict:
    """The display metrics of one (dataset, lang, method, policy) over its streams."""
    ne_u, d_u = ne_unit(lang), display_unit(lang)
    mode, k = policy
    raw_ne = NormalizedErasure(ne_u)
    shown_ne = NormalizedErasure(ne_u, display=mode, display_k=k)
    first = FirstDisplay(d_u, word_s)
    finals = [recs[-1]["text"] for recs in stream_list]
    refs = [recs[-1].get("reference") or "" for recs in stream_list]
    final_decode_ms = [recs[-1].get("e2e_ms", recs[-1].get("decode_ms", 0.0))
                       for recs in stream_list]
    return {
        "streams": len(stream_list), "updates": sum(len(s) for s in stream_list),
        "ne_unit": ne_u, "display_unit": d_u,
        "NE": raw_ne.corpus_score([[r["text"] for r in recs] for recs in stream_list]).score,
        "NE_display": shown_ne.corpus_score(shown).score,
        **first.corpus_score(stream_list, shown).as_row(),
        "final_decode_ms_p50": percentile(final_decode_ms, 50),
        "chrF": ChrF().corpus_score(finals, refs).score if all(refs) else None,
        "signatures": {"NE_display": shown_ne.signature, "first_display": first.signature},
    }


def summarize_display(records: list[dict], modes: Sequence[str], mask_ks: Sequence[int],
                      detokenize: Detokenize | None, word_s: float = 0.4) -> dict:
    """Rows keyed ``dataset|lang|method|mode[|k]``: ``score`` of each policy on each method.

    mask-k needs token ids and ``detokenize`` to reproduce the server exactly; without them
    (records from ``--server``) it masks words or characters (noted in the row)."""
    grouped: dict[tuple[str, str, str], list[list[dict]]] = defaultdict(list)
    for (dataset, lang, method, _), recs in complete_streams(records).items():
        grouped[(dataset, lang, method)].append(recs)
    out: dict = {}
    for (dataset, lang, method), stream_list in grouped.items():
        tokens = detokenize is not None and all("token_ids" in r for s in stream_list
                                                for r in s)
        for mode, k in policies(modes, mask_ks):
            detok = detokenize if tokens else None
            shown = [stream_displays(recs, mode, k, lang, detok) for recs in stream_list]
            row = {"dataset": dataset, "lang": lang, "method": method, "mode": mode, "k": k,
                   "mask_on": ("tokens" if tokens else display_unit(lang))
                   if mode == "mask-k" else None,
                   **score(stream_list, shown, lang, word_s, (mode, k))}
            key = f"{dataset}|{lang}|{method}|{mode}" + (f"|{k}" if k is not None else "")
            out[key] = row
    return out


def _f(v: float | int | None, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def mode_tables(summary: dict, modes: Sequence[str], word_s: float = 0.4) -> list[Block]:
    """One table per display mode, a row per (dataset, lang, method[, k]), then notes."""
    blocks: list[Block] = []
    for mode in modes:
        rows = [r for r in summary.values() if r["mode"] == mode]
        if not rows:
            continue
        blocks.append(f"\n### Display mode `{mode}`\n")
        t = Table(["dataset", "lang", "method", "k", "streams", "NE (raw)", "display NE",
                   "retracted in partials", "final rewrite", "shown before final",
                   "first display s mean/p50/p90", "first display s (CA) mean/p90",
                   "final latency s (CA) p50/p95", "chrF"])
        for r in rows:
            t.add(r["dataset"], r["lang"], r["method"], "-" if r["k"] is None else r["k"],
                  r["streams"], _f(r["NE"]), _f(r["NE_display"]),
                  r["retracted_partial_units"],
                  f"{r['final_rewrite_units']} ({_pct(r['final_rewrite_rate'])})",
                  _pct(r["shown_before_final"]),
                  f"{_f(r['first_display_s_mean'])}/{_f(r['first_display_s_p50'])}/"
                  f"{_f(r['first_display_s_p90'])}",
                  f"{_f(r['first_display_ca_s_mean'])}/{_f(r['first_display_ca_s_p90'])}",
                  f"{_f(r['final_latency_ca_s_p50'])}/{_f(r['final_latency_ca_s_p95'])}",
                  _f(r["chrF"], 1))
        blocks.append(t)
    units = sorted({(r["lang"], r["ne_unit"], r["display_unit"]) for r in summary.values()})
    blocks.append("\n".join([
        "",
        "display NE: normalized erasure of what was displayed (final included), in the NE "
        "unit (" + "; ".join(f"{lang}: {u}" for lang, u, _ in units) + "). Retracted in "
        "partials / final rewrite: display units (" + "; ".join(
            f"{lang}: {d}" for lang, _, d in units) + ") taken back between two partial "
        "displays / by the final (share of final units). Shown before final: share of the "
        "final's units a partial displayed first, at their place.",
        "First display: seconds from a source word's arrival to the first display of its "
        "diagonally aligned target unit (eval/metrics/display.py); arrival clock (no compute) "
        "and computation-aware (CA: one engine, every update in order, recorded decode "
        f"times). Text sets have no audio clock: {word_s} s per source word. Final latency: "
        "CA display of the final minus its arrival. chrF: finals (no policy changes them).",
    ]))
    return blocks


def display_plots(summary: dict, out_dir: Path) -> list[Path]:
    """Per (dataset, lang): display NE against first-display latency (``eval.plots``)."""
    made = []
    for dataset, lang in sorted({(r["dataset"], r["lang"]) for r in summary.values()}):
        rows = [r for r in summary.values() if (r["dataset"], r["lang"]) == (dataset, lang)]
        fig = display_flicker_vs_latency(rows, dataset, lang)
        if fig is not None:
            made.append(save(fig, out_dir / f"display_{dataset}_{lang}.png", dpi=90))
    return made


def display_report(records: list[dict], modes: Sequence[str], mask_ks: Sequence[int],
                   detokenize: Detokenize | None, out: Path, word_s: float = 0.4
                   ) -> list[Block]:
    """Summary, tables and plots into ``out`` (``display.md`` is the blocks' markdown);
    returns the blocks, for ``tables.md`` and the terminal."""
    summary = summarize_display(records, modes, mask_ks, detokenize, word_s)
    out.mkdir(parents=True, exist_ok=True)
    (out / "display_summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    made = display_plots(summary, out / "plots")
    blocks: list[Block] = ["## Display policies", *mode_tables(summary, modes, word_s),
                           "\nPlots: " + ", ".join(str(p.relative_to(out)) for p in made)
                           + "\n"]
    (out / "display.md").write_text(markdown(blocks), encoding="utf-8")
    return blocks


def _detokenizer(records: list[dict], model: str | None) -> Detokenize | None:
    if not any("token_ids" in r for r in records):
        return None
    from app.loader import load_vocab

    return load_vocab(model).detokenize


def parse_modes(spec: str) -> list[str]:
    """``mask-k,stable`` -> the modes, checked."""
    modes = [m.strip() for m in spec.split(",") if m.strip()]
    policies(modes, [])
    return modes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.display_eval", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--out", type=Path, required=True, help="where display.md etc. go")
    ap.add_argument("--records", type=Path, default=None,
                    help="records.jsonl[.gz] (default: OUT/records.jsonl)")
    ap.add_argument("--display-modes", default=",".join(DISPLAY_MODES),
                    help="display policies to score (default: mask-k,stable)")
    ap.add_argument("--mask-k", default="3", type=comma_list(count, "a whole number >= 0"),
                    help="k values for mask-k, e.g. 3,5")
    ap.add_argument("--word-seconds", type=float, default=0.4,
                    help="nominal seconds per source word for text sets (no audio clock)")
    ap.add_argument("--model", default=None, help="GGUF whose vocabulary detokenizes mask-k")
    args = ap.parse_args(argv)
    try:
        modes = parse_modes(args.display_modes)
    except ValueError as exc:
        ap.error(str(exc))
    path = args.records or args.out / "records.jsonl"
    if not path.exists() and path.with_suffix(".jsonl.gz").exists():
        path = path.with_suffix(".jsonl.gz")
    records = read_records(path)
    args.out.mkdir(parents=True, exist_ok=True)
    show(display_report(records, modes, [int(k) for k in args.mask_k.split(",") if k],
                        _detokenizer(records, args.model), args.out, args.word_seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
