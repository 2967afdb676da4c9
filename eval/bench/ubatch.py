"""What llama.cpp's physical batch (n_ubatch) does to the cost of a row, side by side.

    livetrans bench ubatch [--model PATH] [--ubatches 512,48] [--sequences 1,8]
                           [--rows 8,16,32,48,64,96] [--cached 400] [--repeats 7]
                           [--prompt-rows]

Why it exists: from 64 query rows in one physical batch on (GGML_FA_TILE_Q), ggml's
CPU flash attention takes a tiled kernel that skips a block of KV cells only when every
query row of the tile masks all of it. Rows of several sequences in one unified cache
(the way livetrans batches its sequences) rarely mask a whole block together, so each row
attends over every sequence's cells. app.engine.runtime therefore keeps the physical
batch under 64 rows on the CPU; this bench is the measurement behind that default, for
any model and machine.

One context per --ubatches value, on the same model file, each with --sequences
sequences holding --cached tokens. Every forward pass puts --rows new rows (logits
at all of them, as a verify pass has) spread evenly over the sequences, then cuts them
off again. The contexts take turns pass by pass, so machine noise hits them alike; the
table gives the median ms per row of each and the ratio of the first value's time to
each other's (above 1: faster than the first).

--prompt-rows also times, alternated with those, passes of the same rows that read logits
only at each sequence's last row, as a prompt's rows do: the difference is what the output
layer costs a row, the share of a row that verifying a draft or decoding adds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

from app.usage import add_model_options, comma_list

# A neutral English text; its tokens fill the caches and feed the measured rows.
FILL_TEXT = ("The committee met on Tuesday to discuss the new budget, and after a long "
             "debate the members agreed to publish the report next spring. ")


# Bounds on the grid (each context's KV cache grows with all three).
MAX_SEQUENCES = 64
MAX_ROWS = 1024
MAX_CACHED = 8192


@dataclass(frozen=True)
class Cell:
    """One measured shape: ms per row for each ubatch value, in the order given."""

    sequences: int
    rows: int
    ms_per_row: tuple[float, ...]
    # the same with logits at each sequence's last row only (--prompt-rows), else empty
    ms_per_prompt_row: tuple[float, ...] = ()


def spread(rows: int, sequences: int) -> list[int]:
    """``rows`` spread over ``sequences`` as evenly as whole rows allow."""
    base, extra = divmod(rows, sequences)
    return [base + (i < extra) for i in range(sequences)]


def one_pass(rt, counts: list[int], cached: int, tokens: list[int],  # noqa: ANN001
             every_logit: bool = True) -> float:
    """Seconds for ONE forward pass of ``counts[s]`` new rows in sequence ``s``, which
    are removed again afterwards; logits at every row, or at each sequence's last."""
    rows = [(tokens[(cached + i) % len(tokens)], cached + i, seq, every_logit or i == n - 1)
            for seq, n in enumerate(counts) for i in range(n)]
    t0 = time.perf_counter()
    rt.decode_rows(rows)
    seconds = time.perf_counter() - t0
    for seq, n in enumerate(counts):
        if n:
            rt.truncate(cached, seq)
    return seconds


def measure(runtimes: list, sequences: list[int], rows: list[int], cached: int,  # noqa: ANN001
            repeats: int, progress=None, prompt_rows: bool = False) -> list[Cell]:  # noqa: ANN001
    """The grid of ``Cell``s, the runtimes (and with ``prompt_rows`` the two kinds of
    pass) taking turns pass by pass."""
    tokens = runtimes[0].tokenize(FILL_TEXT * (1 + cached // 20))
    for rt in runtimes:
        for seq in range(max(sequences)):
            rt.truncate(0, seq)
            rt.decode_rows([(tokens[i % len(tokens)], i, seq, False) for i in range(cached)])
    cells = []
    for n_seq in sequences:
        for n in rows:
            if n < n_seq:
                continue
            counts = spread(n, n_seq)
            times: list[list[float]] = [[] for _ in runtimes]
            prompt_times: list[list[float]] = [[] for _ in runtimes]
            for _ in range(repeats):
                for i, rt in enumerate(runtimes):
                    times[i].append(one_pass(rt, counts, cached, tokens))
                    if prompt_rows:
                        prompt_times[i].append(one_pass(rt, counts, cached, tokens, False))
            cells.append(Cell(n_seq, n, _ms_per_row(times, n),
                              _ms_per_row(prompt_times, n) if prompt_rows else ()))
            if progress is not None:
                progress.update(1)
    return cells


def _ms_per_row(times: list[list[float]], rows: int) -> tuple[float, ...]:
    return tuple(statistics.median(t) * 1000 / rows for t in times)


def table(cells: list[Cell], ubatches: list[int]) -> str:
    """Markdown: one line a shape, ms per row for each ubatch, ratios against the first;
    where prompt rows were timed, their ms per row for each ubatch after those."""
    prompt = any(c.ms_per_prompt_row for c in cells)
    head = ["sequences", "rows", *(f"ms/row at {u}" for u in ubatches),
            *(f"{ubatches[0]} / {u}" for u in ubatches[1:]),
            *(f"ms/prompt row at {u}" for u in ubatches if prompt)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        ratios = [c.ms_per_row[0] / m for m in c.ms_per_row[1:]]
        lines.append("| " + " | ".join([str(c.sequences), str(c.rows),
                                        *(f"{m:.2f}" for m in c.ms_per_row),
                                        *(f"{r:.2f}x" for r in ratios),
                                        *(f"{m:.2f}" for m in c.ms_per_prompt_row)]) + " |")
    return "\n".join(lines)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench ubatch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(ap)
    whole = comma_list(positive, "a positive whole number")
    ap.add_argument("--ubatches", type=whole, default="512,48",
                    help="n_ubatch values, the first the baseline (default 512,48)")
    ap.add_argument("--sequences", type=whole, default="1,8",
                    help="sequences the rows of a pass are spread over (default 1,8)")
    ap.add_argument("--rows", type=whole, default="8,16,32,48,64,96",
                    help="rows a pass (default 8,16,32,48,64,96)")
    ap.add_argument("--cached", type=positive, default=400,
                    help="tokens each sequence holds in the cache (default 400)")
    ap.add_argument("--repeats", type=positive, default=7, help="passes a shape (default 7)")
    ap.add_argument("--prompt-rows", action="store_true",
                    help="also time the same passes with logits at each sequence's last row "
                         "only, as a prompt's rows have them (alternated with the others)")
    args = ap.parse_args(argv)
    ubatches = [int(u) for u in args.ubatches.split(",") if u.strip()]
    sequences = [int(s) for s in args.sequences.split(",") if s.strip()]
    rows = [int(r) for r in args.rows.split(",") if r.strip()]
    if len(ubatches) < 2 or not sequences or not rows:
        ap.error("--ubatches needs two values or more; --sequences and --rows one or more")
    # every context holds max(--sequences) x (--cached + max(--rows)) cells: bounded
    if max(sequences) > MAX_SEQUENCES or max(rows) > MAX_ROWS or args.cached > MAX_CACHED:
        ap.error(f"at most {MAX_SEQUENCES} sequences, {MAX_ROWS} rows a pass and "
                 f"{MAX_CACHED} cached tokens")
    n_ctx = 256 * (1 + (args.cached + max(rows)) // 256)

    from tqdm import tqdm

    from app.engine.runtime import LlamaRuntime, RuntimeConfig
    from app.model_files import resolve_model_path

    path = resolve_model_path(args.model)
    runtimes = [LlamaRuntime(RuntimeConfig(model_path=path, n_ctx=n_ctx,
                                           n_threads=args.n_threads, n_ubatch=u,
                                           n_seq=max(sequences)))
                for u in ubatches]
    try:
        shapes = sum(1 for s in sequences for r in rows if r >= s)
        with tqdm(total=shapes, desc="shapes", file=sys.stderr) as bar:
            cells = measure(runtimes, sequences, rows, args.cached, args.repeats, bar,
                            args.prompt_rows)
    finally:
        for rt in runtimes:
            rt.close()
    prompt = "; prompt rows: logits at each sequence's last row" if args.prompt_rows else ""
    print(f"**{path.name}: ms per row of one forward pass, logits at every row{prompt}, "
          f"{args.cached} tokens cached a sequence, median of {args.repeats}**\n")
    print(table(cells, ubatches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
