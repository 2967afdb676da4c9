"""``livetrans bench finals``: what a final costs two ways, side by side on the same finals:
its SSBD draft verified at once or in parts of ``--final-draft`` tokens (``--versus
parts``, the default), or, with the draft in parts, with and without giving up a first
answer that begins as a copy of the source (``--versus give-up``: ``Finals.give_up_copies``).

    livetrans bench finals --flores-dir DIR --langs de --offset 100 --limit 40 --parts 4
    livetrans bench finals --flores-dir DIR --langs de --limit 100 --versus give-up

Why a final: it is what every viewer keeps, it is verified without bias (``final_beta``
0: greedy, what re-translation from scratch gives), and its draft is the last partial,
written under the partials' bias, which greedy decoding leaves early. Verified whole, the
rows past the first mismatch are computed and thrown away; verified in parts, a draft
that holds costs a pass more per part.

Every FLORES sentence becomes a lag-k stream translated as the server translates it (one
session; SSBD partials at beta 0.2 with the previous translation as the draft and the
server's default drafters after it; the final at beta 0). At each final the KV cache is as
the partials left it, and the final is translated twice from that same state, once each
way, in turns (which goes first alternates by sentence), each timed on its own; the
session goes on with the whole-draft final. In process, one sequence: the engine alone,
no server, no other work (run it on a quiet machine).

Printed: per way the finals' wall ms (mean, p50, p90), forward passes, SSBD draft tokens
verified and kept, the ratio of the totals, and how many finals came out the same token
for token (a pass of other rows may move a near-tie: ``docs/numerics.md``).
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
from app.engine.verify import top2_gap
from app.loader import load_model
from app.prefix import common_prefix
from app.settings import ModelSettings
from app.translation.backend import GenerationRequest, GenerationResult, run_to_end
from app.translation.drafting import ChainBuilder
from app.translation.llama_backend import StandaloneLlamaBackend
from app.translation.options import TranslateOptions
from app.translation.pathology import fit_for_context
from app.translation.prompts.parts import tokenize_prompt
from app.translation.sessions import Session
from app.translation.translator import plan_prompt, run_update
from app.usage import PlainHelp, UsageError, add_model_options, count
from drafters.chain import DEFAULT_ORDER
from eval.datasets.flores import add_flores_options, read_flores
from eval.datasets.streams import lag_k_stream
from eval.metrics.speed import percentile
from eval.tables import Table, show

PARTIAL_BETA = 0.2
MAX_CONTEXT_CHARS = 2000
# The spread of a top-2 logit gap across batch shapes measured by ``livetrans bench
# numerics`` (tests/numerics.py, reports/2026-11-27-passes): two shapes' greedy outputs may
# part only at a token whose gap is below it; a difference at a larger gap would be a bug.
NEAR_TIE_LOGITS = 1.7


class FinalDraftBackend(StandaloneLlamaBackend):
    """The engine alone, an unbiased generation's draft verified ``parts`` tokens a pass
    (None: at once), as the scheduler does for finals (``SchedulerConfig.final_draft``)."""

    def __init__(self, engine: Engine, parts: int | None) -> None:
        super().__init__(engine)
        self.parts = parts

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        unbiased = req.beta == 0.0 and bool(req.draft)
        return self.engine.generate(req, draft_cap=self.parts if unbiased else None)


@dataclass
class Way:
    """One way of verifying a final's draft and what its finals cost."""

    name: str
    backend: FinalDraftBackend
    give_up_copies: bool = True
    ms: list[float] = field(default_factory=list)
    passes: int = 0
    drafted: int = 0
    kept: int = 0
    outputs: list[list[int]] = field(default_factory=list)
    retried: list[bool] = field(default_factory=list)

    def figures(self) -> dict:
        return {"finals": len(self.ms), "ms_total": round(sum(self.ms), 1),
                "ms_mean": round(statistics.fmean(self.ms), 1) if self.ms else None,
                "ms_p50": percentile(self.ms, 50), "ms_p90": percentile(self.ms, 90),
                "passes": self.passes, "draft_tokens": self.drafted,
                "draft_kept": self.kept}


def final_options(lang: str, max_tokens: int) -> TranslateOptions:
    return TranslateOptions(source_lang="en", target_lang=lang, beta=PARTIAL_BETA,
                            final_beta=0.0, max_tokens=max_tokens)


def translate(backend: FinalDraftBackend, fmt: object, session: Session, source: str,
              is_final: bool, opts: TranslateOptions, chain: object) -> tuple[object, float]:
    """One update as the server makes it; (its outcome, wall ms)."""
    plan = session.plan_draft(opts.target_lang, opts.source_lang)
    prompt = plan_prompt(fmt, source, opts, [], is_final, MAX_CONTEXT_CHARS)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    out = run_to_end(run_update(
        backend, prompt.prompt, opts, is_final, draft_tokens=plan.tokens, chain=chain,
        draft_agreed=plan.agreed, examples=prompt.examples, retry_prompt=prompt.retry,
        terms=prompt.terms, term_prompt=prompt.term_prompt))
    return out, (time.perf_counter() - t0) * 1000


def run(args: argparse.Namespace) -> dict:
    model = load_model(ModelSettings(model=args.model, n_threads=args.n_threads), parallel=1)
    engine, fmt = Engine(model.runtime), model.prompt_format
    parted = Way(f"parts of {args.parts}" if args.versus == "parts" else "give-up",
                 FinalDraftBackend(engine, args.parts))
    # the baseline first: the session goes on with its final
    whole = (Way("whole draft", FinalDraftBackend(engine, None)) if args.versus == "parts"
             else Way("no give-up", parted.backend, give_up_copies=False))
    chains = ChainBuilder(None, None, vocab_size=model.runtime.n_vocab)
    report: dict = {"langs": {}}
    for lang in args.langs:
        sources = read_flores(args.flores_dir, args.split, "en")[args.offset:]
        sources = sources[: args.limit] if args.limit is not None else sources
        opts = final_options(lang, args.max_tokens)
        retried_finals: list[tuple[float, float]] = []  # (baseline ms, method ms)
        chain = chains.build(list(DEFAULT_ORDER), lang)
        same, gaps, retried = 0, [], 0
        for k, source in enumerate(tqdm(sources, desc=f"en-{lang} finals", unit="sentence",
                                        file=sys.stderr)):
            session = Session(session_id=f"finals-{lang}-{k}")
            for i, update in enumerate(lag_k_stream(source, args.lag)):
                if not update.is_final:
                    out, _ = translate(whole.backend, fmt, session, update.source, False,
                                       opts, chain)
                else:
                    out = final_both_ways(engine, [whole, parted] if k % 2 == 0
                                          else [parted, whole], fmt, session, update.source,
                                          opts, chain, whole)
                    a, b = whole.outputs[-1], parted.outputs[-1]
                    if whole.retried[-1] or parted.retried[-1]:
                        retried_finals.append((whole.ms[-1], parted.ms[-1]))
                    if a == b:
                        same += 1
                    elif whole.retried[-1] or parted.retried[-1]:
                        retried += 1  # another prompt: no shared path to compare
                    else:
                        gaps.append(parting_gap(engine, fmt, update.source, opts, a, b))
                session.commit(update.source, out.draft, update.is_final, lang, "en", seq=i,
                               text=out.result.text.strip() if fit_for_context(out.pathology)
                               else None)
        report["langs"][lang] = {
            "sentences": len(sources), "same_output": same, "retried_differ": retried,
            "parting_gaps": [round(g, 3) for g in gaps],
            "near_ties": sum(g < NEAR_TIE_LOGITS for g in gaps),
            "retried_finals": len(retried_finals),
            "retried_ms": [round(sum(ms), 1) for ms in zip(*retried_finals, strict=True)]
            if retried_finals else None}
    report["ways"] = {w.name: w.figures() for w in (whole, parted)}
    report["versus"] = args.versus
    report["ratio_total"] = (round(sum(whole.ms) / sum(parted.ms), 3)
                             if parted.ms and sum(parted.ms) else None)
    return report


def final_both_ways(engine: Engine, ways: list[Way], fmt: object, session: Session,
                    source: str, opts: TranslateOptions, chain: object,
                    baseline: Way) -> object:
    """The final translated once each way from the KV state the partials left; returns
    the ``baseline`` way's outcome (the session goes on with it)."""
    kv = engine.slots.slots[0]
    before = list(kv.cached)
    kept = None
    for way in ways:
        kv.truncate(common_prefix(kv.cached, before))  # as the partials left it
        way_opts = replace(opts, give_up_copies=way.give_up_copies)
        out, ms = translate(way.backend, fmt, session, source, True, way_opts, chain)
        result = out.result
        counts = result.drafts.summary(len(result.tokens))
        way.ms.append(ms)
        way.passes += result.forward_passes
        way.drafted += counts["ssbd_draft_tokens"]
        way.kept += counts["ssbd_accepted_tokens"]
        way.outputs.append(list(result.tokens))
        way.retried.append(bool(out.retried))
        if way is baseline:
            kept = out
    assert kept is not None
    return kept


def parting_gap(engine: Engine, fmt: object, source: str, opts: TranslateOptions,
                a: list[int], b: list[int]) -> float:
    """The top-2 logit gap where two outputs of the same prompt first part, recomputed
    in one pass (a small gap: a near-tie the batch shape moved, not a lossy verify)."""
    prompt = plan_prompt(fmt, source, opts, [], True, MAX_CONTEXT_CHARS).prompt  # type: ignore[arg-type]
    tokens = tokenize_prompt(prompt, engine.rt.tokenize)
    i = common_prefix(a, b)
    first, _ = engine.evaluate_prompt(tokens, a[:i])
    return top2_gap(engine.row(first + i))


TITLES = {"parts": "A final's SSBD draft verified at once vs in parts",
          "give-up": "A final without and with giving up a copy as it begins"}


def table(report: dict) -> Table:
    t = Table(["way", "finals", "ms total", "ms mean", "ms p50", "ms p90", "passes",
               "draft tokens verified", "kept"],
              title=f"{TITLES[report['versus']]} (same finals, same KV state, in turns)")
    for name, f in report["ways"].items():
        t.add(name, f["finals"], f["ms_total"], f["ms_mean"], _ms(f["ms_p50"]), _ms(f["ms_p90"]),
              f["passes"], f["draft_tokens"], f["draft_kept"])
    return t


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench finals", description=__doc__,
                                 formatter_class=PlainHelp)
    add_flores_options(ap, langs="de", limit=40)
    ap.add_argument("--offset", type=count, default=0, help="first FLORES sentence")
    ap.add_argument("--lag", type=int, default=3, help="words revealed per update")
    ap.add_argument("--parts", type=int, default=4,
                    help="draft tokens per pass of the parted way (serve --final-draft)")
    ap.add_argument("--max-tokens", type=int, default=256, help="token cap per update")
    ap.add_argument("--versus", choices=sorted(TITLES), default="parts",
                    help="what the two ways differ in: the draft verified at once against "
                         "in parts (parts), or, in parts, without against with giving up "
                         "a copy as it begins (give-up)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    add_model_options(ap)
    args = ap.parse_args(argv)
    if args.parts < 1:
        raise UsageError("--parts: at least 1")
    report = run(args)
    show([table(report)])
    first, second = report["ways"]
    print(f"{first} / {second}, total final time: {report['ratio_total']}x")
    for lang, v in report["langs"].items():
        gaps = v["parting_gaps"]
        print(f"en-{lang}: same output {v['same_output']}/{v['sentences']}; "
              f"{len(gaps)} parted at a top-2 gap below {NEAR_TIE_LOGITS} logits: "
              f"{v['near_ties']}" + (f" (largest {max(gaps):.2f})" if gaps else "")
              + (f"; {v['retried_differ']} differ after a retry (another prompt)"
                 if v["retried_differ"] else ""))
        if v["retried_ms"]:
            base, method = v["retried_ms"]
            print(f"en-{lang}: {v['retried_finals']} finals retried (either way): "
                  f"{first} {base:.0f} ms, {second} {method:.0f} ms in all "
                  f"({base / method:.2f}x)")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
