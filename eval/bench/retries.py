"""``livetrans bench retries``: a final's retry two ways, side by side on the same finals:
the retry prompt with every example before the talk's context (the layout before
2026-12-08) against the extra examples after it (``FewShotFormat.retry_translation``).

    livetrans bench retries --flores-dir DIR --langs de,ja,zh --limit 200

Why: about one final in eight on the 270M base model comes out as no translation (a
copy, a loop, a prompt example, the wrong script) and is translated once more with the
stronger prompt, and those finals are the slow tail people see. The session's sequence
caches its prompt up to the source; a retry prompt that differs before the context
decodes the context again (about 200 prompt rows at ~3.5 ms each on 2 cores).

Each language's FLORES sentences are one talk, in order: each is translated as a final
would be (greedy, the talk's last ``--context`` clean finals in the prompt), its first
answer alone (no retry). Each pathological one is then retried both ways, in turns (which
goes first alternates), from the same KV state: the session's sequence holding the first
prompt, cut where the retry's prompt departs from it. Each retry is timed on its own.

Printed per language and way: retries, their wall ms (total, p50), prompt rows decoded
(p50), how many came out clean (judged against every example, both sides, and the
context), and chrF of those finals as shown (the retry's answer when clean, else the first)
with the paired-bootstrap interval of the difference; the ratio of the total times. The
two layouts are different prompts: their answers differ, so quality is part of the figure.
In process, one sequence, no server: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from app.engine.engine import Engine
from app.loader import load_model
from app.prefix import common_prefix
from app.settings import ModelSettings
from app.translation.backend import run_to_end
from app.translation.llama_backend import StandaloneLlamaBackend
from app.translation.options import TranslateOptions
from app.translation.pathology import diagnose, fit_for_context
from app.translation.prompts import FewShotFormat
from app.translation.prompts.parts import tokenize_prompt
from app.translation.steps.prompt import plan_prompt
from app.translation.steps.verify import generate
from app.usage import PlainHelp, UsageError, add_model_options
from eval.datasets.flores import add_flores_options, read_flores
from eval.metrics.quality import ChrF, paired_chrf_difference
from eval.tables import Table, show

MAX_CONTEXT_CHARS = 2000
WAYS = ("examples first", "examples late")


@dataclass
class Retries:
    """One way's retries in one language."""

    ms: list[float] = field(default_factory=list)
    prompt_rows: list[int] = field(default_factory=list)
    clean: int = 0
    shown: list[str] = field(default_factory=list)  # the finals as shown

    def figures(self) -> dict:
        return {"retries": len(self.ms), "ms_total": round(sum(self.ms), 1),
                "ms_p50": round(statistics.median(self.ms), 1) if self.ms else None,
                "prompt_rows_p50": statistics.median(self.prompt_rows)
                if self.prompt_rows else None, "clean": self.clean}


def first_answers(backend: StandaloneLlamaBackend, fmt: FewShotFormat, sources: list[str],
                  opts: TranslateOptions, context_n: int) -> list[dict]:
    """Each source translated as a final in talk order, first answer only; the talk's
    context is its last clean finals, as a session keeps them."""
    talk: list[tuple[str, str]] = []
    out = []
    for k, source in enumerate(tqdm(sources, desc=f"en-{opts.target_lang} first answers",
                                    unit="sentence", file=sys.stderr)):
        context = talk[-context_n:] if context_n else []
        plan = plan_prompt(fmt, source, opts, context, True, MAX_CONTEXT_CHARS)
        result = run_to_end(generate(backend, plan.prompt, opts, 0.0, [], 0, None, None, None))
        pathology = diagnose(result.text, source, opts.target_lang, examples=plan.examples,
                             runaway=result.runaway)
        out.append({"k": k, "source": source, "text": result.text.strip(),
                    "pathology": pathology, "context": list(context)})
        if fit_for_context(pathology) and result.text.strip():
            talk.append((source, result.text.strip()))
    return out


def retry_both_ways(engine: Engine, backend: StandaloneLlamaBackend,
                    formats: dict[str, FewShotFormat], first: dict, opts: TranslateOptions,
                    ways: dict[str, Retries], order: list[str]) -> None:
    """``first``'s retry once each way from the same KV state (``order`` says which first)."""
    kv = engine.slots.slots[0]
    one_token = replace(opts, max_tokens=1)
    for name in order:
        plan = plan_prompt(formats[name], first["source"], opts, first["context"], True,
                           MAX_CONTEXT_CHARS)
        assert plan.retry is not None
        normal = tokenize_prompt(plan.prompt, engine.rt.tokenize)
        kv.truncate(common_prefix(kv.cached, normal))  # the session's sequence, as cached
        run_to_end(generate(backend, plan.prompt, one_token, 0.0, [], 0, None, None, None))
        retry = tokenize_prompt(plan.retry, engine.rt.tokenize)
        kv.truncate(common_prefix(kv.cached, retry))
        rows = len(retry) - len(kv.cached)
        t0 = time.perf_counter()
        again = run_to_end(generate(backend, plan.retry, opts, 0.0, [], 0, None, None, None,
                                    one_off=True))
        way = ways[name]
        way.ms.append((time.perf_counter() - t0) * 1000)
        way.prompt_rows.append(rows)
        text = again.text.strip()
        clean = bool(text) and diagnose(text, first["source"], opts.target_lang,
                                        examples=plan.examples, runaway=again.runaway) is None
        way.clean += clean
        way.shown.append(text if clean else first["text"])


def run(args: argparse.Namespace) -> dict:
    model = load_model(ModelSettings(model=args.model, n_threads=args.n_threads), parallel=1)
    if not isinstance(model.prompt_format, FewShotFormat):
        raise UsageError("bench retries compares the few-shot format's retry prompts: "
                         "give a base model (or --prompt-format few-shot)")
    engine = Engine(model.runtime)
    backend = StandaloneLlamaBackend(engine)
    fmt = model.prompt_format
    formats = {WAYS[0]: replace(fmt, late_retry_examples=False),
               WAYS[1]: replace(fmt, late_retry_examples=True)}
    report: dict = {"langs": {}, "context": args.context}
    for lang in args.langs:
        sources = read_flores(args.flores_dir, args.split, "en")[args.offset:]
        sources = sources[: args.limit] if args.limit is not None else sources
        refs = read_flores(args.flores_dir, args.split, lang)[args.offset:][: len(sources)]
        opts = TranslateOptions(source_lang="en", target_lang=lang, beta=0.0, final_beta=0.0,
                                max_tokens=args.max_tokens, context=args.context)
        firsts = first_answers(backend, formats[WAYS[1]], sources, opts, args.context)
        bad = [f for f in firsts if f["pathology"] is not None]
        ways = {name: Retries() for name in WAYS}
        for i, first in enumerate(tqdm(bad, desc=f"en-{lang} retries", unit="retry",
                                       file=sys.stderr)):
            retry_both_ways(engine, backend, formats, first, opts, ways,
                            list(WAYS) if i % 2 == 0 else list(WAYS[::-1]))
        references = [refs[f["k"]] for f in bad]
        entry: dict = {"sentences": len(sources), "retried": len(bad),
                       "ways": {name: w.figures() for name, w in ways.items()}}
        if bad:
            a, b = (ways[name].shown for name in WAYS)
            chrf = ChrF()
            entry["chrf"] = {
                name: round(chrf.corpus_score(ways[name].shown, references).score or 0.0, 2)
                for name in WAYS}
            delta, low, high = paired_chrf_difference(a, b, references)
            entry["chrf_difference"] = [round(delta, 2), round(low, 2), round(high, 2)]
            totals = [sum(ways[name].ms) for name in WAYS]
            entry["ratio_total"] = round(totals[0] / totals[1], 3) if totals[1] else None
        report["langs"][lang] = entry
    return report


def table(report: dict) -> Table:
    t = Table(["lang", "way", "retries", "ms total", "ms p50", "prompt rows p50", "clean",
               "chrF of these finals"],
              title="A final's retry: every example before the context vs the extra ones "
                    f"after it (same finals, same KV state, in turns; context "
                    f"{report['context']})")
    for lang, entry in report["langs"].items():
        for name, f in entry["ways"].items():
            t.add(lang, name, f["retries"], f["ms_total"], f["ms_p50"], f["prompt_rows_p50"],
                  f["clean"], entry.get("chrf", {}).get(name, "-"))
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench retries", description=__doc__,
                                 formatter_class=PlainHelp)
    add_flores_options(ap, langs="de", limit=100)
    ap.add_argument("--offset", type=int, default=0, help="first FLORES sentence")
    ap.add_argument("--context", type=int, default=2,
                    help="previous clean finals in the prompt (serve's default: 2)")
    ap.add_argument("--max-tokens", type=int, default=256, help="token cap per answer")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    add_model_options(ap)
    args = ap.parse_args(argv)
    if args.offset < 0 or args.context < 0:
        raise UsageError("--offset and --context: 0 or more")
    report = run(args)
    show([table(report)])
    first, second = WAYS
    for lang, entry in report["langs"].items():
        if "ratio_total" not in entry:
            print(f"en-{lang}: no first answer needed a retry")
            continue
        delta, low, high = entry["chrf_difference"]
        print(f"en-{lang}: {entry['retried']} of {entry['sentences']} finals retried; "
              f"{first} / {second}, total retry time: {entry['ratio_total']}x; chrF "
              f"{second} - {first}: {delta:+.2f} [{low:+.2f}, {high:+.2f}]")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
