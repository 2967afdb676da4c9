"""The engine's cost model on this machine: decode, verify and prefill costs.

    livetrans bench engine [--model PATH] [--repeats 5] [--ks 1,2,4,8,16,32,64]

Prints the median time of a single-token decode step, of a batched verification of k draft
tokens with logits at every draft position (what SSBD pays), of the same k tokens with one
logits row (what a plain prefill pays), and prefill throughput. Later benchmarks quote these
numbers to explain where time goes. Nothing here is asserted: it only measures.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app.engine.engine import Engine
from app.engine.runtime import LlamaRuntime
from app.loader import load_model
from app.settings import ModelSettings
from app.translation.prompts import FewShotFormat
from app.usage import PlainHelp, add_model_options, comma_list, positive_int

SOURCE = (
    "The city council approved a new plan to expand the bus network and build three new "
    "bicycle lanes along the river before the end of next year."
)


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench engine", description=__doc__,
                                 formatter_class=PlainHelp)
    add_model_options(ap)
    ap.add_argument("--repeats", type=int, default=5,
                    help="timed runs per measurement (the median is printed)")
    ap.add_argument("--ks", default="1,2,4,8,16,32,64",
                    type=comma_list(positive_int, "a positive whole number"),
                    help="comma-separated draft lengths k at which verify and prefill "
                         "are timed")
    ap.add_argument("--n-gpu-layers", type=int, default=0,
                    help="layers offloaded to the GPU (-1 = all)")
    args = ap.parse_args(argv)

    rt = load_model(ModelSettings(model=args.model, n_threads=args.n_threads,
                                  n_gpu_layers=args.n_gpu_layers, parallel=2)).runtime
    engine = Engine(rt)
    prompt = rt.tokenize(FewShotFormat().translation(SOURCE, "en", "de").text, add_bos=True)
    filler = rt.tokenize(" Der Stadtrat hat einen neuen Plan genehmigt, um das Busnetz zu "
                         "erweitern und drei neue Radwege entlang des Flusses zu bauen." * 3)
    base = len(prompt)
    engine.evaluate_prompt(prompt)

    def single() -> None:
        engine.truncate(base)
        engine.decode([filler[0]], [0])
        engine.row(0)

    def verify(k: int, all_rows: bool):
        def run() -> None:
            engine.truncate(base)
            draft = filler[:k]
            engine.decode(draft, list(range(k)) if all_rows else [k - 1])
            for i in range(k) if all_rows else [k - 1]:
                engine.row(i).argmax()
        return run

    single()  # warm-up
    one = _median_ms(single, args.repeats * 4)
    print(f"model: {rt.config.model_path.name}  threads: {args.n_threads or 'all'}  "
          f"vocab: {rt.n_vocab}")
    print(f"single-token decode step (logits + argmax): {one:.2f} ms")
    print()
    print(f"{'k':>4} {'verify ms (k rows)':>19} {'prefill ms (1 row)':>19} "
          f"{'per token':>10} {'vs k single steps':>18}")
    for k in [int(x) for x in args.ks.split(",")]:
        k = min(k, len(filler))
        v = _median_ms(verify(k, True), args.repeats)
        p = _median_ms(verify(k, False), args.repeats)
        print(f"{k:>4} {v:>19.2f} {p:>19.2f} {v / k:>10.2f} {k * one / v:>17.2f}x")
    print()
    n = len(prompt)

    def prefill() -> None:
        engine.truncate(0)
        engine.decode(prompt, [n - 1])

    pf = _median_ms(prefill, args.repeats)
    print(f"prefill of the {n}-token translation prompt: {pf:.1f} ms = {n / pf * 1000:.0f} tok/s")
    _prefix_copy(rt, prompt, args.repeats)
    rt.close()
    return 0


def _prefix_copy(rt: LlamaRuntime, prompt: list[int], repeats: int) -> None:
    """What copying the shared few-shot preamble into a new sequence saves
    (``llama_memory_seq_cp``) against decoding the same prompt there from scratch."""
    other = rt.tokenize(FewShotFormat().translation("Good evening.", "en", "de").text,
                        add_bos=True)
    shared = 0
    while shared < min(len(other), len(prompt)) and other[shared] == prompt[shared]:
        shared += 1
    rt.truncate(0, 0)
    rt.decode(other, 0, [len(other) - 1], seq=0)  # another session's prompt on sequence 0

    def from_scratch() -> None:
        rt.truncate(0, 1)
        rt.decode(prompt, 0, [len(prompt) - 1], seq=1)

    def copied() -> None:
        rt.seq_copy(0, 1, shared)
        rt.decode(prompt[shared:], shared, [len(prompt) - shared - 1], seq=1)

    scratch = _median_ms(from_scratch, repeats)
    copy = _median_ms(copied, repeats)
    print(f"a new sequence's prompt ({len(prompt)} tokens, {shared} shared with another "
          f"sequence): decoded {scratch:.1f} ms, preamble copied {copy:.1f} ms "
          f"({scratch / copy:.1f}x)")


if __name__ == "__main__":
    raise SystemExit(main())
