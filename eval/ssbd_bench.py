"""AR re-translation vs SSBD on FLORES lag-k update streams, side by side in one process.

    livetrans ssbd-bench --langs de,zh,ja --limit 50 [--flores-dir DIR] [--out results.jsonl]

For every sentence, the source is revealed k words at a time (3, 6, 9, ... words, the last
update the full sentence) and every method translates every update. Methods are
interleaved per sentence, so machine noise hits them alike, and every method runs through
``app.translator.translate_update``, the server's own code path:

* ``ar``: re-translation from scratch (prompt prefix cache on, no draft);
* ``ssbd-b<beta>``: the previous update's translation as the draft, verified with beta;
* variants: ``+stopdraft`` (the old stop token kept at the draft's end and biased, the
  prototype's failure mode), ``+biastail`` (bias on draft-final punctuation too),
  ``+draftmask<k>`` (draft mask-k), ``+drafters`` (drafter chain for new tokens).

Per method it prints total decode time, output tokens/s, speedup over AR, A/D, A/O, NE
(words for space-delimited targets, characters for zh/ja) with and without the display
mask, chrF of the final translations, and where the time goes (first pass vs decoding).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from app.engine.engine import Engine
from app.engine.runtime import LlamaRuntime, RuntimeConfig
from app.model_files import resolve_model_path
from app.prompts import FewShotFormat
from app.translator import TranslateOptions, masked_tokens, translate_update
from eval.datasets.flores import read_flores_pair
from eval.datasets.streams import lag_k_stream
from eval.metrics.erasure import normalized_erasure_corpus
from eval.metrics.quality import chrf_score


@dataclass(frozen=True)
class Method:
    name: str
    beta: float | None  # None = AR (no draft)
    stop_draft: bool = False
    unbiased_tail: bool = True
    draft_mask_k: int = 0
    drafters: bool = False


def parse_methods(spec: str) -> list[Method]:
    methods = []
    for item in spec.split(","):
        item = item.strip()
        if item == "ar":
            methods.append(Method("ar", None))
            continue
        base, *flags = item.split("+")
        if not base.startswith("ssbd-b"):
            raise SystemExit(f"unknown method {item!r} (ar, ssbd-b0.2, ssbd-b0.2+stopdraft...)")
        m = Method(item, float(base[len("ssbd-b"):]))
        for flag in flags:
            if flag == "stopdraft":
                m = Method(**{**m.__dict__, "stop_draft": True, "unbiased_tail": False})
            elif flag == "biastail":
                m = Method(**{**m.__dict__, "unbiased_tail": False})
            elif flag.startswith("draftmask"):
                m = Method(**{**m.__dict__, "draft_mask_k": int(flag[len("draftmask"):])})
            elif flag == "drafters":
                m = Method(**{**m.__dict__, "drafters": True})
            else:
                raise SystemExit(f"unknown method flag {flag!r}")
        methods.append(m)
    return methods


@dataclass
class MethodTotals:
    decode_ms: float = 0.0
    prompt_ms: float = 0.0
    output_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    forward_passes: int = 0
    updates: int = 0
    lse: int = 0
    full_streams: list[list[str]] = field(default_factory=list)
    display_streams: list[list[str]] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)


def run_stream(engine: Engine, fmt: FewShotFormat, method: Method, updates: list[str],
               src_lang: str, tgt_lang: str, mask_k: int, chain, newline_token: int):
    """Translate one lag-k stream with one method; returns per-update records."""
    records = []
    previous: list[int] = []
    for i, source in enumerate(updates):
        final = i == len(updates) - 1
        opts = TranslateOptions(
            source_lang=src_lang, target_lang=tgt_lang, beta=method.beta or 0.0,
            mask_k=method.draft_mask_k or mask_k,
            mask_mode="draft" if method.draft_mask_k else "display",
            unbiased_tail=method.unbiased_tail, max_tokens=256,
        )
        use_draft = method.beta is not None
        prompt = fmt.translation(source, src_lang, tgt_lang)
        result, _ = translate_update(
            engine, prompt, opts, final,
            draft_tokens=previous if use_draft else [],
            chain=chain if method.drafters else None,
            extra_draft=[newline_token] if (method.stop_draft and previous) else None,
        )
        shown = masked_tokens(result.tokens, mask_k, final)
        display = engine.rt.detokenize(shown).strip()
        records.append({
            "update": i, "source": source, "final": final, "text": result.text.strip(),
            "display": display, "tokens": len(result.tokens),
            "drafted": result.draft_tokens, "accepted": result.accepted_tokens,
            "ssbd_drafted": result.ssbd_draft_tokens,
            "ssbd_accepted": result.ssbd_accepted_tokens,
            "forward_passes": result.forward_passes, "decode_ms": round(result.decode_ms, 2),
            "prompt_ms": round(result.prompt_ms, 2), "lse": result.lse_computed,
            "finish": result.finish_reason,
        })
        previous = list(result.tokens)
    return records


def summarize(name: str, totals: MethodTotals, ar: MethodTotals | None, refs: list[str],
              tgt_lang: str) -> dict:
    unit = "char" if tgt_lang in ("zh", "ja") else "word"
    ne = normalized_erasure_corpus(totals.full_streams, unit=unit)
    ne_disp = normalized_erasure_corpus(totals.display_streams, unit=unit)
    chrf = chrf_score(totals.finals, refs)
    secs = totals.decode_ms / 1000
    return {
        "method": name,
        "decode_s": round(secs, 2),
        "prompt_s": round(totals.prompt_ms / 1000, 2),
        "tok_per_s": round(totals.output_tokens / secs, 1) if secs else 0.0,
        "speedup": round(ar.decode_ms / totals.decode_ms, 3) if ar else 1.0,
        "A/D": round(totals.accepted / totals.drafted, 3) if totals.drafted else None,
        "A/O": round(totals.accepted / totals.output_tokens, 3) if totals.output_tokens else 0,
        "NE": round(ne, 3),
        "NE_display": round(ne_disp, 3),
        "chrF": round(chrf, 2),
        "final_words": sum(len(f.split()) for f in totals.finals),
        "forward_passes": totals.forward_passes,
        "updates": totals.updates,
        "lse_computed": totals.lse,
    }


def print_table(lang: str, rows: list[dict]) -> None:
    cols = ["method", "decode_s", "prompt_s", "tok_per_s", "speedup", "A/D", "A/O", "NE",
            "NE_display", "chrF", "final_words", "forward_passes", "lse_computed"]
    print(f"\n## en->{lang}")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join("-" if row[c] is None else str(row[c]) for c in cols) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans ssbd-bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--flores-dir", type=Path, required=True,
                    help="FLORES-200 root (with dev/eng_Latn.dev ...)")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--langs", default="de,zh,ja")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--lag", type=int, default=3)
    ap.add_argument("--mask-k", type=int, default=3)
    ap.add_argument("--methods", default="ar,ssbd-b0,ssbd-b0.2")
    ap.add_argument("--dict-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, help="JSONL of every update record")
    args = ap.parse_args(argv)

    methods = parse_methods(args.methods)
    rt = LlamaRuntime(RuntimeConfig(model_path=resolve_model_path(args.model)))
    engine = Engine(rt)
    fmt = FewShotFormat()
    newline = rt.tokenize("\n")[-1]
    out = args.out.open("w") if args.out else None
    summaries = {}
    for lang in args.langs.split(","):
        chain_for = None
        if any(m.drafters for m in methods):
            from app.drafting import ChainBuilder

            chain_for = ChainBuilder(args.dict_dir, rt.tok.identity()).build(
                ["previous", "dictionary", "ngram", "trigram"], lang)
        pairs = read_flores_pair(args.flores_dir, args.split, "en", lang)
        pairs = pairs[args.offset: args.offset + args.limit]
        totals = {m.name: MethodTotals() for m in methods}
        refs = []
        t0 = time.perf_counter()
        for sid, (src, ref) in enumerate(tqdm(pairs, desc=f"en->{lang}", unit="sent")):
            refs.append(ref)
            updates = [u.source for u in lag_k_stream(src, args.lag)]
            for m in methods:
                recs = run_stream(engine, fmt, m, updates, "en", lang, args.mask_k, chain_for,
                                  newline)
                t = totals[m.name]
                for r in recs:
                    t.decode_ms += r["decode_ms"]
                    t.prompt_ms += r["prompt_ms"]
                    t.output_tokens += r["tokens"]
                    t.drafted += r["drafted"]
                    t.accepted += r["accepted"]
                    t.forward_passes += r["forward_passes"]
                    t.lse += r["lse"]
                    t.updates += 1
                t.full_streams.append([r["text"] for r in recs])
                t.display_streams.append([r["display"] for r in recs])
                t.finals.append(recs[-1]["text"])
                if out:
                    for r in recs:
                        out.write(json.dumps({"lang": lang, "sentence": args.offset + sid,
                                              "method": m.name, **r}, ensure_ascii=False) + "\n")
        ar = totals.get("ar")
        rows = [summarize(m.name, totals[m.name], ar, refs, lang) for m in methods]
        summaries[lang] = rows
        print_table(lang, rows)
        print(f"(wall {time.perf_counter() - t0:.0f}s, {len(pairs)} sentences, lag {args.lag}, "
              f"display mask-k {args.mask_k})")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
