"""Live speed of drafter chains vs plain decoding, side by side in one process.

    livetrans bench drafters --flores-dir DIR --dict-dir DICTS --langs de,zh,ja,uk \\
        --limit 50 [--chains dictionary,ngram,trigram;ngram]

Stateless (non-session) translation of FLORES sentences: every sentence is translated by
plain greedy decoding (``ar``) and by each chain, interleaved per sentence, through the
server's code path (``app.translation.translator.run_update``). Verification of drafter
tokens is
exact greedy, so outputs match ``ar`` except where batch-shape noise flips a near-tie; the
table counts identical outputs. Printed per method: total decode time, tokens/s, speedup
over ``ar``, forward passes, and proposed/accepted tokens per drafter.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tqdm import tqdm

from app.engine.engine import Engine
from app.loader import load_model
from app.settings import ModelSettings
from app.translation.backend import run_to_end
from app.translation.drafting import ChainBuilder
from app.translation.llama_backend import StandaloneLlamaBackend
from app.translation.translator import TranslateOptions, run_update
from app.usage import PlainHelp, add_model_options, comma_list
from drafters.chain import DEFAULT_ORDER
from eval.datasets.flores import add_flores_options, read_flores_pair
from eval.tables import Table, show


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench drafters", description=__doc__,
                                 formatter_class=PlainHelp)
    add_model_options(ap)
    add_flores_options(ap, langs="de,zh,ja,uk", limit=50)
    ap.add_argument("--dict-dir", type=Path, default=None,
                    help="folder of drafter tables (<lang>.dict, <lang>.trigram.npz); "
                         "without it only ngram proposes")
    ap.add_argument("--budget", type=int, default=6,
                    help="most draft tokens a chain proposes per step")
    ap.add_argument("--chains", default="dictionary,ngram,trigram;ngram;dictionary",
                    type=comma_list(comma_list(choices=DEFAULT_ORDER), "a list of drafters",
                                    sep=";"),
                    help="chains to compare, ';' between chains, ',' between drafters "
                         "(dictionary, ngram, trigram)")
    args = ap.parse_args(argv)

    model = load_model(ModelSettings(model=args.model, n_threads=args.n_threads,
                                     prompt_format="few-shot", parallel=1))
    rt = model.runtime
    engine = Engine(rt)
    fmt = model.prompt_format
    builder = ChainBuilder(args.dict_dir, rt.tok.identity(), budget=args.budget,
                           vocab_size=rt.tok.n_vocab)
    chains = [c.split(",") for c in args.chains.split(";")]
    for lang in args.langs:
        pairs = read_flores_pair(args.flores_dir, args.split, "en", lang)[: args.limit]
        names = ["ar"] + ["+".join(c) for c in chains]
        totals = {n: {"ms": 0.0, "tokens": 0, "passes": 0, "same": 0, "drafters": {}}
                  for n in names}
        t0 = time.perf_counter()
        for src, _ref in tqdm(pairs, desc=f"en->{lang}", unit="sent"):
            prompt = fmt.translation(src, "en", lang)
            opts = TranslateOptions(source_lang="en", target_lang=lang, beta=0.0, mask_k=0,
                                    max_tokens=256, draft_budget=args.budget,
                                    final_retry=False)
            reference_tokens = None
            for name, chain_names in zip(names, [None, *chains], strict=True):
                chain = builder.build(chain_names, lang) if chain_names else None
                result = run_to_end(run_update(StandaloneLlamaBackend(engine), prompt, opts,
                                               True, draft_tokens=[], chain=chain)).result
                t = totals[name]
                t["ms"] += result.decode_ms
                t["tokens"] += len(result.tokens)
                t["passes"] += result.forward_passes
                if reference_tokens is None:
                    reference_tokens = result.tokens
                t["same"] += int(result.tokens == reference_tokens)
                for d, (proposed, ok) in result.drafts.drafters().items():
                    acc = t["drafters"].setdefault(d, [0, 0])
                    acc[0] += proposed
                    acc[1] += ok
        ar_ms = totals["ar"]["ms"]
        t = Table(["method", "decode_s", "tok/s", "speedup", "forward passes",
                   "identical to ar", "proposed/accepted by drafter"],
                  title=f"en->{lang}: {len(pairs)} FLORES {args.split} sentences, "
                        f"budget {args.budget} (wall {time.perf_counter() - t0:.0f}s)")
        for name in names:
            tot = totals[name]
            per = ", ".join(f"{d}: {a}/{p} ({a / p:.0%})"
                            for d, (p, a) in tot["drafters"].items() if p)
            t.add(name, f"{tot['ms'] / 1000:.2f}", f"{tot['tokens'] / tot['ms'] * 1000:.1f}",
                  f"{ar_ms / tot['ms']:.3f}", tot["passes"], f"{tot['same']}/{len(pairs)}",
                  per or "-")
        show([t])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
