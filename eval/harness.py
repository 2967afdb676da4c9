"""``livetrans eval``: quality, flicker and speed of live re-translation, as tables and plots.

    livetrans eval --flores-dir eval/samples/flores_layout --limit 3 --out results/sample
    livetrans eval --dataset flores --flores-dir DIR --langs de,zh,ja --limit 100 \\
        --methods ar --betas 0.2 --mask-k 3,5 --out results/flores
    livetrans eval --dataset acl --acl-dir DIR --langs de --betas 0,0.1,0.2,0.3,0.4,0.5
    livetrans eval --dataset asr --asr-file partials.jsonl --asr-refs-dir DIR ...
    livetrans eval ... --server http://127.0.0.1:8000     # measure a running server

Text sets become lag-k streams (``--lag``, default 3: "FLORES lag-3"); ASR files are
replayed as recorded. All methods of a run are interleaved per stream, so machine noise
hits them alike, and run through the server's engine code (in process), or through a
running server over HTTP with ``--server`` (end-to-end, sessions and all).

The output folder holds ``records.jsonl`` (every update of every stream and method),
``summary.json``, ``tables.md`` (SSBD Tables 2, 3 and 4) and PNG plots. A run that is
interrupted resumes where it stopped: streams already complete in ``records.jsonl`` are
skipped.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from dataclasses import replace
from pathlib import Path

from tqdm import tqdm

from app.translation.glossary import applicable
from app.translation.pathology import fit_for_context
from app.translation.translator import DEFAULT_OPTIONS
from app.usage import (
    PlainHelp,
    UsageError,
    add_model_options,
    checked,
    comma_list,
    count,
    fraction,
    require_file,
)
from drafters.chain import DEFAULT_ORDER
from eval.datasets.acl6060 import read_acl_pair, read_talk_ids
from eval.datasets.aligned import DatasetNotFoundError
from eval.datasets.asr_partials import read_asr_streams
from eval.datasets.flores import language_arg, language_list, read_flores, read_flores_pair
from eval.datasets.streams import Stream, lag_k_stream
from eval.display_eval import display_report, parse_modes
from eval.glossaries import GlossaryFile, load_glossaries
from eval.methods import (
    Method,
    NotOverHttp,
    TalkSettings,
    http_fields,
    options_for,
    parse_methods,
    run_stream,
)
from eval.report import (
    load_records,
    model_comparison,
    pathology_listing,
    plots,
    summarize,
    table2,
    table3,
    table4,
    whole_talks,
)
from eval.tables import Block, markdown, show


def load_streams(args: argparse.Namespace, lang: str) -> list[Stream]:
    if args.dataset == "flores":
        pairs = read_flores_pair(args.flores_dir, args.split, args.source_lang, lang)
    elif args.dataset == "acl":
        pairs = read_acl_pair(args.acl_dir, args.split, args.source_lang, lang)
        talks = read_talk_ids(args.acl_dir, args.split)
        if talks is not None and len(talks) == len(pairs):
            streams = [Stream(str(i), lag_k_stream(src, args.lag), ref, talk=talks[i])
                       for i, (src, ref) in enumerate(pairs)]
            if args.talk_limit:
                streams = first_of_each_talk(streams, args.talk_limit)
            return streams[args.offset: args.offset + args.limit]
    else:
        streams = read_asr_streams(args.asr_file)
        if args.asr_refs_dir is not None:  # utterance i is line i of the source set
            refs = read_flores(args.asr_refs_dir, args.split, lang) if args.asr_refs == \
                "flores" else read_acl_pair(args.asr_refs_dir, args.split, "en", lang)
            refs = [r if isinstance(r, str) else r[1] for r in refs]
            for s in streams:
                s.reference = refs[int(s.id) - 1] if s.id.isdigit() else None
        return streams[args.offset: args.offset + args.limit]
    pairs = pairs[args.offset: args.offset + args.limit]
    return [Stream(str(args.offset + i), lag_k_stream(src, args.lag), ref)
            for i, (src, ref) in enumerate(pairs)]


def first_of_each_talk(streams: list[Stream], n: int) -> list[Stream]:
    """The first ``n`` streams of every talk, in order."""
    kept, seen = [], {}
    for stream in streams:
        seen[stream.talk] = seen.get(stream.talk, 0) + 1
        if seen[stream.talk] <= n:
            kept.append(stream)
    return kept


def base_beta(args: argparse.Namespace) -> str:
    """The beta of the main SSBD method (Table 2 and the mask-k table): 0.2 when swept."""
    betas = [b for b in args.betas.split(",") if b]
    return "0.2" if "0.2" in betas else betas[0]


def expand_methods(args: argparse.Namespace) -> list[Method]:
    spec = [m for m in args.methods.split(",") if m]
    betas = [b for b in args.betas.split(",") if b]
    suffix = "+drafters" if args.drafters else ""
    spec += [f"ssbd-b{b}{suffix}" for b in betas]
    if args.draft_mask_k and betas:
        spec += [f"ssbd-b{base_beta(args)}{suffix}+draftmask{k}"
                 for k in args.draft_mask_k.split(",")]
    seen: list[str] = []
    for m in spec:
        if m not in seen:
            seen.append(m)
    return parse_methods(",".join(seen))


class InProcessRunner:
    """Runs methods on a local engine (the server's code path, no HTTP)."""

    def __init__(self, args: argparse.Namespace, model_path: str | None = None,
                 dict_dir: Path | None = None, base_tokenizer: str | None = None) -> None:
        from app.engine.engine import Engine
        from app.loader import load_model
        from app.settings import ModelSettings
        from app.translation.drafting import ChainBuilder
        from app.translation.prompts import FewShotFormat

        path = args.model if model_path is None else model_path
        model = load_model(ModelSettings(model=path, n_threads=args.n_threads,
                                         prompt_format=args.prompt_format, parallel=1))
        self.rt = model.runtime
        self.engine = Engine(self.rt)
        self.fmt = model.prompt_format
        if args.prompt_examples is not None and isinstance(self.fmt, FewShotFormat):
            self.fmt = replace(self.fmt, n_examples=args.prompt_examples)
        self.chains = ChainBuilder(args.dict_dir if dict_dir is None else dict_dir,
                                   self.rt.tok.identity(), vocab_size=self.rt.tok.n_vocab)
        # a compared model's ids in the base model's vocabulary, where it was cut from it
        self.id_map = trimmed_ids(model_path, base_tokenizer) if base_tokenizer else None
        self.drafter_names = args.drafters.split(",") if args.drafters else []
        self.newline = self.rt.tokenize("\n")[-1]
        self.src = args.source_lang
        self.max_tokens = args.max_tokens
        self.talks = TalkSessions()

    def run(self, method: Method, stream: Stream, lang: str,
            talk: TalkSettings = TalkSettings()) -> list[dict]:
        from app.translation.sessions import Session

        chain = self.chains.build(["previous", *self.drafter_names], lang) \
            if method.drafters else None
        # Each stream starts from an empty KV cache: results then do not depend on what ran
        # before (batch shapes decide near-ties), so a resumed run reproduces a full one.
        self.engine.truncate(0)
        key = self.talks.key(lang, stream, method)
        session = self.talks.sessions.setdefault(key, Session(session_id=key)) \
            if key else None
        records = run_stream(self.engine, self.fmt, method, stream, self.src, lang, chain,
                             self.newline, self.max_tokens, session=session, talk=talk)
        if method.model:  # records speak the run's base vocabulary, or carry no ids
            for r in records:
                ids = r.pop("token_ids", None)
                if self.id_map is not None and ids is not None:
                    r["token_ids"] = [int(self.id_map[t]) for t in ids]
        return records

    def detokenize(self, ids: list[int]) -> str:
        return self.rt.detokenize(ids)


class TalkSessions:
    """One session per (language, talk, method): a talk's sentences are one speaker's
    segments, so with ``context`` each sees the finals before it. A resumed run replays
    the finals of the streams it skips (``remember``), so its context is a full run's."""

    def __init__(self) -> None:
        self.sessions: dict = {}
        self.ids: dict = {}

    @staticmethod
    def key(lang: str, stream: Stream, method: Method) -> str | None:
        return None if stream.talk is None else f"{lang}|{stream.talk}|{method.name}"

    def remember(self, lang: str, stream: Stream, method: Method, source: str,
                 text: str, src_lang: str) -> None:
        from app.translation.sessions import Session

        key = self.key(lang, stream, method)
        if key is not None:
            session = self.sessions.setdefault(key, Session(session_id=key))
            session.commit(source, [], True, lang, src_lang, text=text)


def trimmed_ids(model_path: str | None, base_tokenizer: str) -> list[int] | None:
    """For a model that ``livetrans trim-vocab`` cut from the run's base model (its source
    tokenizer is ``base_tokenizer``): each id's original id, so its records read in the
    base vocabulary. None for any other model (its records then carry no token ids)."""
    if model_path is None:
        return None
    from app.vocab_trim.gguf_rewrite import SOURCE_IDS_KEY, SOURCE_TOKENIZER_KEY, open_gguf

    fields = open_gguf(Path(model_path)).fields
    ids, source = fields.get(SOURCE_IDS_KEY), fields.get(SOURCE_TOKENIZER_KEY)
    if ids is None or source is None or source.contents() != base_tokenizer:
        return None
    return [int(i) for i in ids.contents()]


def _compared_model(spec: str) -> tuple[str, str, Path | None]:
    """``NAME=PATH[:DICT_DIR]`` of ``--compare-model``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest or not name.replace("-", "").replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(
            f"{spec!r} is not NAME=PATH (e.g. trim-de=models/gemma-en-de.gguf)")
    path, _, dict_dir = rest.partition(":")
    return name, path, Path(dict_dir) if dict_dir else None


class ServerRunner:
    """Runs methods against a running livetrans server over HTTP (sessions, end to end)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import httpx

        self.client = httpx.Client(base_url=args.server.rstrip("/"), timeout=300)
        self.src = args.source_lang
        self.drafters = args.drafters.split(",") if args.drafters else None
        self.mask_k = int(args.mask_k.split(",")[0])
        self.api_key = args.api_key
        self.max_tokens = args.max_tokens
        self.talks = TalkSessions()

    def check(self, methods: list[Method]) -> None:
        """Refuse, before any request, a method the HTTP API cannot carry."""
        for method in methods:
            try:
                http_fields(method, self.src, "de", self.max_tokens, self.mask_k, None)
            except NotOverHttp as exc:
                raise UsageError(str(exc)) from None

    def run(self, method: Method, stream: Stream, lang: str,
            talk: TalkSettings = TalkSettings()) -> list[dict]:
        # a talk is one server session (its finals are the context of its later streams)
        key = self.talks.key(lang, stream, method)
        sid = self.talks.ids.setdefault(key, f"eval-{uuid.uuid4().hex[:12]}") if key \
            else f"eval-{uuid.uuid4().hex[:12]}"
        records = []
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        fields = http_fields(method, self.src, lang, self.max_tokens, self.mask_k,
                             self.drafters, talk)
        for i, update in enumerate(stream.updates):
            body = {"model": "default", **fields,
                    "messages": [{"role": "user", "content": update.source}],
                    "session_id": sid, "is_final": update.is_final, "seq": i}
            t0 = time.perf_counter()
            resp = self.client.post("/v1/chat/completions", json=body, headers=headers)
            resp.raise_for_status()
            data = resp.json()
            info = data["livetrans"]
            records.append({
                "update": i, "source": update.source, "read": len(update.source.split()),
                "t": update.t, "final": update.is_final,
                "text": data["choices"][0]["message"]["content"], "display": info["display_text"],
                "tokens": data["usage"]["completion_tokens"], "drafted": info["draft_tokens"],
                "accepted": info["accepted_tokens"],
                "ssbd_drafted": info.get("ssbd_draft_tokens", 0),
                "ssbd_accepted": info.get("ssbd_accepted_tokens", 0),
                "drafts": info.get("drafts"), "forward_passes": info["forward_passes"],
                "decode_ms": info["decode_ms"], "prompt_ms": 0.0,
                "e2e_ms": (time.perf_counter() - t0) * 1000, "finish":
                    data["choices"][0]["finish_reason"], "pathology": info.get("pathology"),
                "retried": info.get("retried"), "draft_dropped": info.get("draft_dropped"),
                "glossary": info.get("glossary"),
                "prompt_tokens": data["usage"]["prompt_tokens"],
                "prompt_tokens_cached": ((data["usage"].get("prompt_tokens_details") or {})
                                         .get("cached_tokens", 0)),
            })
        return records

    def detokenize(self, ids: list[int]) -> str:  # pragma: no cover - no token ids over HTTP
        raise NotImplementedError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans eval", description=__doc__,
                                 formatter_class=PlainHelp)
    ap.add_argument("--dataset", choices=["flores", "acl", "asr"], default="flores",
                    help="text set read as lag-k streams (flores, acl) or recorded ASR "
                         "partials (asr)")
    ap.add_argument("--flores-dir", type=Path,
                    help="FLORES-200 folder holding dev/ and devtest/ "
                         "(see README 'Evaluation data')")
    ap.add_argument("--acl-dir", type=Path,
                    help="ACL 60/60 folder holding <split>/<lang>.txt (see README "
                         "'Evaluation data')")
    ap.add_argument("--asr-file", type=Path,
                    help="ASR partials JSONL, one utterance a line (for --dataset asr)")
    ap.add_argument("--asr-refs", choices=["flores", "acl"], default="flores",
                    help="which set the ASR utterances read (for references)")
    ap.add_argument("--asr-refs-dir", type=Path,
                    help="folder of the --asr-refs set, utterance i its line i "
                         "(without it, ASR streams have no references)")
    ap.add_argument("--split", default="dev",
                    help="split: dev or devtest (FLORES), dev or eval (ACL 60/60)")
    ap.add_argument("--source-lang", default="en", type=language_arg,
                    help="language of the source text")
    ap.add_argument("--langs", default=["de"], type=language_list,
                    help="comma-separated target languages (ISO 639-1 or FLORES codes)")
    ap.add_argument("--limit", type=int, default=100, help="streams per language")
    ap.add_argument("--offset", type=int, default=0, help="streams skipped first, per language")
    ap.add_argument("--lag", type=int, default=3,
                    help="words revealed per update of a lag-k stream")
    ap.add_argument("--methods", default="ar", help="extra methods, e.g. ar,ssbd-b0.2+stopdraft")
    ap.add_argument("--betas", default="0.2", type=comma_list(fraction, "a beta in [0, 1)"),
                    help="one SSBD method per beta")
    ap.add_argument("--mask-k", default="3,5", type=comma_list(count, "a whole number >= 0"),
                    help="display-only mask-k values to score")
    ap.add_argument("--draft-mask-k", default="",
                    type=comma_list(count, "a whole number >= 0"),
                    help="draft mask-k methods, e.g. 3,5")
    ap.add_argument("--display-modes", default="mask-k,stable",
                    help="display policies to score, one table each ('' to skip)")
    ap.add_argument("--drafters", default="", type=comma_list(choices=DEFAULT_ORDER),
                    help="e.g. dictionary,ngram,trigram")
    ap.add_argument("--dict-dir", type=Path,
                    help="folder of drafter tables (<lang>.dict, <lang>.trigram.npz) for "
                         "--drafters")
    add_model_options(ap)
    ap.add_argument("--compare-model", type=_compared_model, action="append", default=[],
                    metavar="NAME=PATH[:DICT_DIR]",
                    help="also run every method on this GGUF, interleaved per stream, as "
                         "METHOD@NAME (speedups against --model's AR); DICT_DIR: its "
                         "drafter tables (default --dict-dir); repeatable")
    ap.add_argument("--prompt-format", default=None,
                    help="few-shot, chat-template (the family from the model) or "
                         "chat-<family>: generic, gemma, qwen, llama, tower, smollm "
                         "(default: chosen from the model)")
    ap.add_argument("--prompt-examples", type=int, default=None,
                    help="few-shot examples in the prompt (default: the server's)")
    ap.add_argument("--max-tokens", type=int, default=256,
                    help="most tokens generated per update")
    ap.add_argument("--context", type=checked(count, "a whole number >= 0"),
                    default=DEFAULT_OPTIONS.context,
                    help="earlier finals of the talk each update sees (ACL 60/60 talks from "
                         "talk_ids.txt; other sets have one-sentence talks); a method's "
                         "+ctxN overrides it (default: the server's)")
    ap.add_argument("--glossary", type=Path, default=None, metavar="FILE.json",
                    help="term lists: {LANG: {TALK_ID or '*': {source term: target "
                         "term}}}; every method uses them (+nogloss: not), term accuracy is "
                         "scored for every method")
    ap.add_argument("--talk-limit", type=checked(count, "a whole number >= 0"), default=0,
                    help="ACL 60/60: the first N sentences of every talk (0: all)")
    ap.add_argument("--max-context-chars", type=checked(count, "a whole number >= 0"),
                    default=2000, help="characters of context at most, as serve's")
    ap.add_argument("--server", default=None, help="evaluate a running server over HTTP")
    ap.add_argument("--api-key", default=None, help="bearer token for --server")
    ap.add_argument("--comet-checkpoint", type=Path, default=None,
                    help="wmt22-comet-da model.ckpt (default: the Hugging Face cache; "
                         "COMET is skipped without one)")
    ap.add_argument("--out", type=Path, required=True,
                    help="folder for records.jsonl, summary.json, tables.md and plots")
    ap.add_argument("--report-only", action="store_true", help="recompute tables, no model")
    args = ap.parse_args(argv)

    if args.source_lang in args.langs:
        ap.error(f"--langs {','.join(args.langs)}: {args.source_lang} is the source language "
                 "(--source-lang); name the languages to translate into")
    args.out.mkdir(parents=True, exist_ok=True)
    records_path = args.out / "records.jsonl"
    langs = args.langs
    try:
        methods = expand_methods(args)
    except ValueError as exc:
        ap.error(f"--methods: {exc}")
    mask_ks = [int(k) for k in args.mask_k.split(",") if k]
    try:
        display_modes = parse_modes(args.display_modes) if args.display_modes else []
    except ValueError as exc:
        ap.error(f"--display-modes: {exc}")
    glossaries = load_glossaries(args.glossary) if args.glossary else GlossaryFile({})
    runner = None
    if not args.report_only:
        try:
            streams = {lang: load_streams(args, lang) for lang in langs}
        except DatasetNotFoundError as exc:
            raise UsageError(str(exc)) from None
        if args.server and args.compare_model:
            ap.error("--compare-model runs models in process; it cannot be used with --server")
        for _, path, _ in args.compare_model:
            require_file(path, "--compare-model")
        runner = ServerRunner(args) if args.server else InProcessRunner(args)
        if isinstance(runner, ServerRunner):
            runner.check(methods)
        runners: list[tuple[str, InProcessRunner | ServerRunner]] = [("", runner)] + [
            (name, InProcessRunner(args, path, dict_dir, base_tokenizer=runner.rt.tok.identity()))
            for name, path, dict_dir in args.compare_model]
        (args.out / "run.json").write_text(json.dumps(
            {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            indent=2))
        done = {(r["lang"], r["stream"], r["method"]): r
                for r in load_records(records_path) if r["final"]}
        todo = [(lang, s) for lang in langs for s in streams[lang]]
        with open(records_path, "a", encoding="utf-8") as out:
            for lang, stream in tqdm(todo, desc="streams", unit="stream"):
                for method, label_runner in [
                        (replace(m, name=f"{m.name}@{label}", model=label) if label else m, r)
                        for m in methods for label, r in runners]:
                    glossary = glossaries.for_stream(lang, stream.talk)
                    talk = TalkSettings(args.context, glossary, args.max_context_chars)
                    final = done.get((lang, stream.id, method.name))
                    if final is not None:
                        if fit_for_context(final.get("pathology")):  # as the run made it
                            label_runner.talks.remember(lang, stream, method, final["source"],
                                                        final["text"], args.source_lang)
                        continue
                    recs = label_runner.run(method, stream, lang, talk)
                    opts = options_for(method, args.source_lang, lang, args.max_tokens,
                                       talk=talk)
                    for r in recs:
                        r.update(dataset=args.dataset, source_lang=args.source_lang,
                                 lang=lang, stream=stream.id, method=method.name,
                                 reference=stream.reference, talk=stream.talk,
                                 context=opts.context, glossary_used=opts.glossary is not None)
                        if r["final"] and glossary:  # scored for every method alike
                            r["terms"] = [[t.source, t.target]
                                          for t in applicable(glossary, r["source"])]
                        out.write(json.dumps(r, ensure_ascii=False) + "\n")
                    out.flush()  # a stream is written whole: resume never sees half of one
    records = load_records(records_path)
    if not records:
        raise UsageError(f"no records in {records_path} (run without --report-only first)")
    detok = None
    if runner is not None and not args.server:
        detok = runner.detokenize
    elif any("token_ids" in r for r in records):
        from app.loader import load_vocab

        detok = load_vocab(args.model).detokenize
    summary = summarize(records, mask_ks, detok, args.comet_checkpoint)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    base = None
    if [b for b in args.betas.split(",") if b]:
        base = f"ssbd-b{base_beta(args)}" + ("+drafters" if args.drafters else "")
    blocks: list[Block] = ["# livetrans eval\n\n## Table 2 layout",
                           *table2(summary, mask_ks[0] if mask_ks else 0),
                           "\n## Pathological finals (app.translation.pathology), by stream",
                           pathology_listing(summary)]
    t3 = table3(summary)
    if t3:
        blocks += ["\n## Table 3 layout (beta sweep)", *t3]
    if base and mask_ks:
        blocks += ["\n## Table 4 layout (mask-k)", *table4(summary, mask_ks, base)]
    talks = whole_talks(summary, records)
    if talks:
        blocks += ["\n## Whole talks: context and glossaries", *talks]
    compared = model_comparison(summary, records)
    if compared:
        blocks += ["\n## Models compared (--compare-model)", *compared]
    if display_modes:
        blocks += ["", *display_report(records, display_modes, mask_ks or [3], detok,
                                       args.out)]
    made = plots(summary, records, args.out / "plots")
    blocks.append("\nPlots: " + ", ".join(str(p.relative_to(args.out)) for p in made) + "\n")
    (args.out / "tables.md").write_text(markdown(blocks), encoding="utf-8")
    show(blocks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
