"""Drafter emulation without the model (DictSpec section 4.5).

    livetrans emulate --langs de,zh,ja,uk --flores-dir DIR --mono-dir DIR [--limit 200]

Reference translations, tokenized as the model would emit them, are replayed as if the
model had produced them: at each step the drafter chain proposes up to ``budget`` tokens
for the current history, the longest prefix agreeing with the reference is accepted, and
the "model" adds one more token. This isolates the draft mechanism from the machine.

Reported per configuration:
* emulated speedup = reference tokens / verification steps;
* coverage = share of steps that had a proposal;
* MAL = mean accepted length: accepted draft tokens per step that had a proposal;
* acceptance = accepted / proposed draft tokens;
* cost-aware speedup: as speedup, but each proposed token also costs ``--row-cost`` of a
  step (rejected proposals are not free on a CPU).

The sweep is a small grid over n-gram order {n1, n12, n123}, table size and p_min.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from app.usage import PlainHelp, add_model_options, comma_list, positive_int
from drafters.base import DraftContext
from drafters.build import (
    ORDERS,
    fertility,
    prefix_candidates,
    read_lines,
    select_entries,
    tokenized_ngrams,
)
from drafters.chain import DrafterChain
from drafters.dictionary import DictionaryDrafter
from drafters.ngram import PromptNgramDrafter
from eval.datasets.flores import add_flores_options, read_flores
from eval.tables import Table, show


@dataclass
class EmulationResult:
    tokens: int = 0
    steps: int = 0
    proposal_steps: int = 0
    proposed: int = 0
    accepted: int = 0

    @property
    def speedup(self) -> float:
        return self.tokens / self.steps if self.steps else 0.0

    def cost_speedup(self, row_cost: float) -> float:
        """Speedup when each proposed token costs ``row_cost`` of a decoding step (a logits
        row in the verifying pass: ~2.6 ms against ~38 ms a step for Gemma 270M on 2 CPU
        cores, see ``livetrans bench engine``)."""
        cost = self.steps + row_cost * self.proposed
        return self.tokens / cost if cost else 0.0

    @property
    def coverage(self) -> float:
        return self.proposal_steps / self.steps if self.steps else 0.0

    @property
    def mal(self) -> float:
        return self.accepted / self.proposal_steps if self.proposal_steps else 0.0

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0


def emulate_sequence(chain: DrafterChain, target: Sequence[int], prompt: Sequence[int],
                     budget: int, result: EmulationResult) -> None:
    pos = 0
    n = len(target)
    while pos < n:
        proposal = chain.propose_from(DraftContext(history=target[:pos], prompt=prompt),
                                      budget).tokens
        accepted = 0
        for tok in proposal:
            if pos + accepted < n and target[pos + accepted] == tok:
                accepted += 1
            else:
                break
        chain.record(len(proposal), accepted)
        result.steps += 1
        if proposal:
            result.proposal_steps += 1
            result.proposed += len(proposal)
            result.accepted += accepted
        pos += accepted + 1  # the verifying pass also yields the model's next token
    result.tokens += n


def run_emulation(chain: DrafterChain, targets: list[list[int]], prompts: list[list[int]],
                  budget: int) -> EmulationResult:
    result = EmulationResult()
    for target, prompt in zip(targets, prompts, strict=True):
        emulate_sequence(chain, target, prompt, budget, result)
    return result


# One extra logits row costs about 4 ms against an 18 ms single-token step on the 2-core
# development machine (``livetrans bench engine``, Gemma 3 270M, OpenMP wait policy auto).
ROW_COST = 0.22


def _row(table: Table, lang: str, label: str, r: EmulationResult, row_cost: float,
         extra: str = "") -> None:
    """Add one configuration's row, and say it on stderr (a grid takes a while)."""
    table.add(lang, label, f"{r.speedup:.3f}", f"{r.cost_speedup(row_cost):.3f}",
              f"{r.coverage:.1%}", f"{r.mal:.2f}", f"{r.acceptance:.1%}", extra)
    print(f"  {lang} {label}: speedup {r.speedup:.3f}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans emulate", description=__doc__,
                                 formatter_class=PlainHelp)
    add_flores_options(ap, langs="de,zh,ja,uk", limit=None)
    ap.add_argument("--mono-dir", type=Path, required=True, help="folder of <lang>.txt corpora")
    add_model_options(ap, threads=False)
    ap.add_argument("--budget", type=int, default=8,
                    help="most draft tokens proposed per step")
    ap.add_argument("--orders", default="n1,n12,n123", type=comma_list(choices=sorted(ORDERS)),
                    help="comma-separated n-gram orders to sweep (n1, n12, n123)")
    ap.add_argument("--sizes", default="10000,50000,200000",
                    type=comma_list(positive_int, "a positive whole number"),
                    help="comma-separated dictionary sizes (entries) to sweep")
    ap.add_argument("--p-mins", default="0.2,0.5,0.8", type=comma_list(float, "a number"),
                    help="comma-separated minimum continuation probabilities to sweep")
    ap.add_argument("--max-lines", type=int, default=None, help="corpus lines to use")
    ap.add_argument("--row-cost", type=float, default=ROW_COST,
                    help="cost of one proposed token as a fraction of a decoding step")
    args = ap.parse_args(argv)
    cost = args.row_cost

    from app.loader import load_vocab

    vocab = load_vocab(args.model)
    orders = args.orders.split(",")
    sizes = [int(x) for x in args.sizes.split(",")]
    p_mins = [float(x) for x in args.p_mins.split(",")]
    print(f"tokenizer: {vocab.model_name}; budget {args.budget}; references: FLORES "
          f"{args.split}")
    table = Table(["lang", "config", "speedup", "cost-aware speedup", "coverage", "MAL",
                   "acceptance", "notes"])
    for lang in args.langs:
        refs = read_flores(args.flores_dir, args.split, lang)[: args.limit]
        srcs = read_flores(args.flores_dir, args.split, "en")[: args.limit]
        targets = [vocab.tokenize(" " + r) for r in refs]
        prompts = [vocab.tokenize(" " + s) for s in srcs]
        fert = fertility(refs, lang, vocab)
        t0 = time.perf_counter()
        lines = read_lines(args.mono_dir / f"{lang}.txt", args.max_lines)
        ngrams = tokenized_ngrams(lines, lang, vocab, max(ORDERS[o] for o in orders), 1)
        build_s = time.perf_counter() - t0
        ngram_only = run_emulation(DrafterChain([PromptNgramDrafter()], adaptive=False,
                                                budget=args.budget), targets, prompts,
                                   args.budget)
        _row(table, lang, "prompt n-gram only", ngram_only, cost, f"fertility {fert:.2f}")
        grid = list(itertools.product(orders, sizes, p_mins))
        best: tuple[float, str] | None = None
        for order in tqdm(orders, desc=f"{lang} orders", leave=False):
            cands = prefix_candidates((t, c) for o, t, c in ngrams if o <= ORDERS[order])
            for size, p_min in itertools.product(sizes, p_mins):
                dictionary = DictionaryDrafter.from_entries(select_entries(cands, p_min, size))
                label = f"dict {order} {size // 1000}k p>={p_min}"
                r = run_emulation(DrafterChain([dictionary], adaptive=False,
                                               budget=args.budget), targets, prompts,
                                  args.budget)
                _row(table, lang, label, r, cost, f"{len(dictionary)} entries")
                if best is None or r.cost_speedup(cost) > best[0]:
                    best = (r.cost_speedup(cost), label, dictionary)
        assert best is not None
        hybrid = run_emulation(DrafterChain([best[2], PromptNgramDrafter()], adaptive=False,
                                            budget=args.budget), targets, prompts, args.budget)
        _row(table, lang, f"hybrid: {best[1]} + n-gram", hybrid, cost,
             f"{len(grid)} configs, n-gram extraction {build_s:.0f}s")
    show([table])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
