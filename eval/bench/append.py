"""``livetrans bench append``: append-only commits against re-translation, side by side.

    livetrans bench append --data-dir DATA --datasets flores,acl --langs de,ja --limit 10

The same timed ASR streams (``DATA/asr_partials/{flores200,acl6060}_dev_en.jsonl``; the
references are line i of ``DATA/flores200`` and ``DATA/acl6060``) are translated twice per
language, on the server's code path (``run_update`` with a ``Session``): once as plain
re-translation (SSBD at the server's defaults, display-only mask-k), once in append mode
(``app.translation.commit_policy``: words committed once consecutive outputs agree on
them beyond the mask, every later update and the final decoded with the committed tokens
forced). Both see the same clock: an update is taken when it arrives (its ASR time ``t``)
or when the engine is free; a partial that a newer update overtook while the engine was
busy is skipped, as the server's queue keeps only the newest partial.

What is scored, per dataset and language:

* quality of the finals: chrF and BLEU (sacrebleu), re-translation against committed, and
  the paired chrF difference with its 95% bootstrap interval;
* erasure: NE of what each mode hands out (re-translation's outputs; the committed texts,
  which must be 0) in words, or characters for ja/zh;
* latency of the words as the field reports it: LAAL (StreamLAAL on gold segments) and
  YAAL (IWSLT 2026) from ``omnisteval``, computation-unaware (a word counts from the ASR
  time of the update that emitted it) and computation-aware (from when that update's
  translation was done), in seconds. Re-translation is scored twice: "final" (every word
  of the final caption at its arrival: what an append-only consumer of re-translation
  gets) and "revisable" (a word counts from the update after which it never changed,
  paying for that with NE > 0). Committed words count from their commit.

Writes ``append.md`` and ``append_summary.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnisteval.data import Instance
from omnisteval.scoring import LAALScorer, YAALScorer

from app.translation.backend import run_to_end
from app.translation.commit_policy import SegmentCommits, final_with_prefix
from app.translation.display import display_unit
from app.translation.llama_backend import StandaloneLlamaBackend
from app.translation.sessions import Session
from app.translation.translator import DEFAULT_OPTIONS, plan_prompt, run_update
from app.usage import PlainHelp, add_model_options
from eval.datasets.acl6060 import read_acl_pair
from eval.datasets.aligned import DatasetNotFoundError
from eval.datasets.asr_partials import read_asr_streams
from eval.datasets.flores import language_list, read_flores
from eval.datasets.streams import Stream
from eval.metrics.erasure import NormalizedErasure
from eval.metrics.latency import stable_since
from eval.metrics.quality import Bleu, ChrF, paired_chrf_difference

DATASETS = {"flores": "flores200_dev_en.jsonl", "acl": "acl6060_dev_en.jsonl"}
MODES = ("retranslate", "append")


@dataclass
class Emission:
    """What one applied update handed out: its text (re-translation's output, or the
    committed text), the ASR time it was sent at and when its translation was done."""

    text: str
    t: float
    done: float


@dataclass
class StreamRun:
    """One stream in one mode: every emission in order, the final's text, decode time."""

    emissions: list[Emission] = field(default_factory=list)
    final: str = ""
    decode_s: float = 0.0
    skipped: int = 0


def load_streams(data: Path, dataset: str, lang: str, limit: int) -> list[Stream]:
    """The dataset's timed ASR streams with line i of its ``lang`` references."""
    streams = read_asr_streams(data / "asr_partials" / DATASETS[dataset], limit)
    if dataset == "flores":
        refs = read_flores(data / "flores200", "dev", lang)
    else:
        refs = [tgt for _, tgt in read_acl_pair(data / "acl6060", "dev", "en", lang)]
    for stream in streams:
        i = int(stream.id) - 1 if stream.id.isdigit() else -1
        stream.reference = refs[i] if 0 <= i < len(refs) else None
    return [s for s in streams if s.reference]


def normalise(text: str, unit: str) -> str:
    """One space between words (omnisteval counts words by single spaces)."""
    return " ".join(text.split()) if unit == "word" else text.strip()


def unit_len(text: str, unit: str) -> int:
    """Length in omnisteval's units: words split on single spaces, or characters."""
    text = normalise(text, unit)
    if not text:
        return 0
    return len(text.split(" ")) if unit == "word" else len(text)


class Runner:
    """Runs streams on one in-process engine, in either mode, on a shared clock rule."""

    def __init__(self, model: str | None, n_threads: int | None) -> None:
        from app.engine.engine import Engine
        from app.loader import load_model
        from app.settings import ModelSettings

        loaded = load_model(ModelSettings(model=model, n_threads=n_threads, parallel=1))
        self.rt = loaded.runtime
        self.engine = Engine(self.rt)
        self.fmt = loaded.prompt_format

    def run(self, stream: Stream, lang: str, mode: str) -> StreamRun:
        """Translate ``stream`` into ``lang`` as ``mode`` does (see the module docstring)."""
        from dataclasses import replace

        self.engine.truncate(0)  # each stream from an empty cache: runs are reproducible
        opts = replace(DEFAULT_OPTIONS, source_lang="en", target_lang=lang, context=0)
        session = Session(session_id=f"bench-{stream.id}")
        commits = SegmentCommits(self.rt.token_bytes, display_unit(lang), opts.mask_k)
        out = StreamRun()
        clock = 0.0
        updates = stream.updates
        for i, update in enumerate(updates):
            t = float(update.t or 0.0)
            later = updates[i + 1] if i + 1 < len(updates) else None
            if not update.is_final and later is not None and float(later.t or 0.0) <= clock:
                out.skipped += 1  # overtaken while the engine was busy
                continue
            plan = session.plan_draft(lang, "en")
            prompt = plan_prompt(self.fmt, update.source, opts, [], update.is_final, 2000)
            forced = commits.forced() if mode == "append" else []
            began = time.perf_counter()
            outcome = run_to_end(run_update(
                StandaloneLlamaBackend(self.engine), prompt.prompt, opts, update.is_final,
                draft_tokens=plan.tokens, draft_agreed=plan.agreed, examples=prompt.examples,
                retry_prompt=prompt.retry, forced=forced))
            spent = time.perf_counter() - began
            out.decode_s += spent
            clock = max(clock, t) + spent
            session.commit(update.source, outcome.draft, update.is_final, lang, "en", seq=i)
            text = (outcome.caption if outcome.caption is not None
                    else outcome.result.text).strip()
            if mode == "retranslate":
                out.emissions.append(Emission(text, t, clock))
                if update.is_final:
                    out.final = text
            elif update.is_final:
                step = commits.final(final_with_prefix(commits.text, text,
                                                       display_unit(lang)))
                out.emissions.append(Emission(step.text, t, clock))
                out.final = step.text
            else:
                step = commits.partial(outcome.result.tokens, text)
                if step is not None:
                    out.emissions.append(Emission(step.text, t, clock))
        return out


def word_delays(run: StreamRun, unit: str, mode: str, aware: bool) -> list[float]:
    """Seconds at which each unit of the final was emitted (see the module docstring):
    ``mode`` "append" (from its commit), "final" (all at the final) or "revisable"."""
    final = normalise(run.final, unit)
    n = unit_len(final, unit)
    when = [e.done if aware else e.t for e in run.emissions]
    if not run.emissions or n == 0:
        return []
    if mode == "final":
        return [when[-1]] * n
    if mode == "append":
        delays: list[float] = []
        for e, at in zip(run.emissions, when, strict=True):
            emitted = min(unit_len(e.text, unit), n)
            delays += [at] * (emitted - len(delays))
        return delays + [when[-1]] * (n - len(delays))
    outputs = [normalise(e.text, unit).split(" ") if unit == "word"
               else list(normalise(e.text, unit)) for e in run.emissions]
    return [when[i] for i in stable_since(outputs)][:n]


def glued(delta: str, unit: str) -> bool:
    """A delta that extends the last committed word instead of starting a new one ("Hund"
    + "es"): no character is taken back, but NE in words counts the word as revised.
    Punctuation ("Hund" + ",") is no such case in meaning, though NE in words counts it
    too. Characters (ja, zh) have no words to extend."""
    return unit == "word" and bool(delta) and delta[0].isalnum()


def latency(runs: Sequence[StreamRun], streams: Sequence[Stream], unit: str, mode: str,
            aware: bool) -> dict[str, float]:
    """LAAL (StreamLAAL on gold segments) and YAAL in seconds, from ``omnisteval``."""
    instances = []
    for run, stream in zip(runs, streams, strict=True):
        delays = word_delays(run, unit, mode, aware)
        end = max(float(u.t or 0.0) for u in stream.updates)
        if not delays or end <= 0:
            continue
        ms = [d * 1000 for d in delays]
        instances.append(Instance(prediction=normalise(run.final, unit),
                                  reference=stream.reference or "", latency_unit=unit,
                                  source_length=end * 1000,
                                  emission_cu=ms, emission_ca=ms))
    return {"laal": LAALScorer()(instances) / 1000, "yaal": YAALScorer()(instances) / 1000}


def score(streams: Sequence[Stream], runs: dict[str, list[StreamRun]],
          lang: str) -> dict[str, object]:
    """Every figure of one (dataset, language): see the module docstring."""
    unit = "char" if display_unit(lang) == "char" else "word"
    refs = [s.reference or "" for s in streams]
    row: dict[str, object] = {"streams": len(streams), "unit": unit}
    for mode in MODES:
        finals = [r.final for r in runs[mode]]
        row[f"{mode}_chrf"] = ChrF().corpus_score(finals, refs).score
        row[f"{mode}_bleu"] = Bleu(lang).corpus_score(finals, refs).score
        handed_out = [[e.text for e in r.emissions] for r in runs[mode]]
        row[f"{mode}_ne"] = NormalizedErasure(unit).corpus_score(handed_out).score
        row[f"{mode}_ne_char"] = NormalizedErasure("char").corpus_score(handed_out).score
        row[f"{mode}_decode_s"] = sum(r.decode_s for r in runs[mode])
    delta, low, high = paired_chrf_difference(
        [r.final for r in runs["retranslate"]], [r.final for r in runs["append"]], refs)
    row["chrf_delta"], row["chrf_delta_ci"] = delta, [low, high]
    committed = [len(r.emissions) > 1 for r in runs["append"]]
    deltas = [b.text[len(a.text):] for r in runs["append"]
              for a, b in zip(r.emissions, r.emissions[1:], strict=False)]
    row["append_steps"] = len(deltas)
    row["append_glued"] = sum(1 for d in deltas if glued(d, unit)) / max(len(deltas), 1)
    row["committed_early"] = sum(committed) / max(len(committed), 1)
    for aware in (False, True):
        tag = "ca" if aware else "cu"
        for name, mode, kind in (("retranslate_final", "retranslate", "final"),
                                 ("retranslate_revisable", "retranslate", "revisable"),
                                 ("append", "append", "append")):
            figures = latency(runs[mode], streams, unit, kind, aware)
            row[f"{name}_laal_{tag}"] = figures["laal"]
            row[f"{name}_yaal_{tag}"] = figures["yaal"]
    return row


def table(rows: dict[str, dict[str, object]]) -> str:
    """The markdown table of ``append.md``."""
    head = ("| dataset / lang | n | chrF retr. / append (delta, 95% CI) | BLEU retr. / append "
            "| NE words retr. / append (append in characters; deltas extending a word) "
            "| StreamLAAL s, CU: final / revisable / append "
            "| YAAL s, CU: final / revisable / append | StreamLAAL s, CA: final / append "
            "| share of segments with words committed before the final |")
    lines = [head, "|" + "---|" * 9]

    def f(value: object) -> str:
        return "n/a" if isinstance(value, float) and math.isnan(value) else f"{value:.2f}"

    for key, r in rows.items():
        ci = r["chrf_delta_ci"]
        lines.append(
            f"| {key} | {r['streams']} "
            f"| {r['retranslate_chrf']:.1f} / {r['append_chrf']:.1f} "
            f"({r['chrf_delta']:+.1f}, [{ci[0]:+.1f}, {ci[1]:+.1f}]) "  # type: ignore[index]
            f"| {r['retranslate_bleu']:.1f} / {r['append_bleu']:.1f} "
            f"| {r['retranslate_ne']:.2f} / {r['append_ne']:.3f} ({r['append_ne_char']:.3f}; "
            f"{r['append_glued']:.1%}) "
            f"| {f(r['retranslate_final_laal_cu'])} / {f(r['retranslate_revisable_laal_cu'])}"
            f" / {f(r['append_laal_cu'])} "
            f"| {f(r['retranslate_final_yaal_cu'])} / {f(r['retranslate_revisable_yaal_cu'])}"
            f" / {f(r['append_yaal_cu'])} "
            f"| {f(r['retranslate_final_laal_ca'])} / {f(r['append_laal_ca'])} "
            f"| {r['committed_early']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench append", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--data-dir", type=Path, required=True,
                    help="folder holding flores200/, acl6060/ and asr_partials/ (README "
                         "'Evaluation data')")
    ap.add_argument("--datasets", default="flores,acl",
                    help="comma-separated: flores, acl")
    ap.add_argument("--langs", default=["de", "ja"], type=language_list,
                    help="comma-separated target languages")
    ap.add_argument("--limit", type=int, default=10, help="streams per dataset")
    add_model_options(ap)
    ap.add_argument("--out", type=Path, default=Path("results/append-bench"),
                    help="folder for append.md and append_summary.json")
    args = ap.parse_args(argv)
    datasets = [d for d in args.datasets.split(",") if d]
    unknown = [d for d in datasets if d not in DATASETS]
    if unknown:
        ap.error(f"unknown dataset(s) {unknown}: choose from {', '.join(DATASETS)}")
    runner = Runner(args.model, args.n_threads)
    rows: dict[str, dict[str, object]] = {}
    for dataset in datasets:
        for lang in args.langs:
            try:
                streams = load_streams(args.data_dir, dataset, lang, args.limit)
            except DatasetNotFoundError as exc:
                print(f"skipped {dataset} {lang}: {exc}", flush=True)
                continue
            if not streams:
                continue
            runs = {mode: [runner.run(s, lang, mode) for s in streams] for mode in MODES}
            rows[f"{dataset} {lang}"] = score(streams, runs, lang)
            print(table({f"{dataset} {lang}": rows[f"{dataset} {lang}"]}).splitlines()[-1],
                  flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    text = table(rows)
    (args.out / "append.md").write_text(text, encoding="utf-8")
    (args.out / "append_summary.json").write_text(json.dumps(rows, indent=2),
                                                  encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
