"""How much do batch shapes move the model's logits, and when does that change an output?

    livetrans bench numerics --flores-dir DIR --limit 200 [--langs de] [--out DIR]

llama.cpp computes a row's logits with kernels whose summation order depends on the shape
of the batch the row is in (how many rows, where the KV cells lie, how the prompt was cut
into chunks). Greedy decoding is therefore exact only up to that noise: where the model's
top two candidates are closer than the noise, a batch of another shape may pick the other
one. This bench measures the noise and every resulting divergence, so tests can use a
tolerance grounded in a measurement and the README can say what users may expect.

For each source sentence it decodes the greedy translation one row per step after a
one-pass prefill (the reference), then recomputes the SAME token path (teacher-forced) in
other shapes:

- ``verify``: the prompt's last token and the whole output in ONE pass (SSBD's verify).
- ``shared``: one row per step, but in a batch with three other sequences' rows while their
  KV cells fill the same cache (``--parallel 4`` under load).
- ``chunked``: the prompt prefilled in chunks of ``--chunk`` rows, then one row per step.
- ``cached``: the prompt's shared prefix taken from the KV cache of another prompt, then
  the rest in one pass (what prefix reuse does between requests).

Per row it records max |delta logit| against the reference over the whole vocabulary, how
far the gap between the reference's two best tokens moved (the "gap shift": a greedy
choice can flip only where the gap is smaller than its shift), and whether the greedy
choice flips; at each sentence's first flip (where greedy output would first diverge) the
reference's top-2 gap. Nothing is asserted here: it measures.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.engine.runtime import LlamaRuntime
from app.engine.verify import top2_gap
from app.loader import load_model
from app.settings import ModelSettings
from app.translation.prompts import FewShotFormat
from app.usage import PlainHelp, add_model_options, positive_int
from eval.datasets.flores import language_list, read_flores
from eval.tables import Table, show, write_results

MODES = ("verify", "shared", "chunked", "cached")
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "flores_layout"
OTHERS = 3  # sequences sharing the batch in the ``shared`` mode


@dataclass
class ModeStats:
    """One shape's deviations from the reference, over every row of every sentence."""

    deltas: list[float] = field(default_factory=list)  # max |delta logit| per row
    gap_shifts: list[float] = field(default_factory=list)  # |change of the top-2 gap| per row
    flips: int = 0  # rows whose greedy choice differs from the reference's
    first_flip_gaps: list[float] = field(default_factory=list)  # one per diverged sentence

    def summary(self, sentences: int) -> dict:
        d = np.asarray(self.deltas or [0.0])
        return {
            "rows": len(self.deltas),
            "delta_p50": float(np.percentile(d, 50)),
            "delta_p99": float(np.percentile(d, 99)),
            "delta_max": float(d.max()),
            "gap_shift_p99": float(np.percentile(np.asarray(self.gap_shifts or [0.0]), 99)),
            "gap_shift_max": max(self.gap_shifts, default=0.0),
            "flipped_rows": self.flips,
            "diverged_sentences": len(self.first_flip_gaps),
            "sentences": sentences,
            "gap_at_divergence_max": max(self.first_flip_gaps, default=None),
            "gaps_at_divergence": sorted(self.first_flip_gaps),
        }


class NumericsProbe:
    """Runs the reference and every shape on one runtime with ``1 + OTHERS`` sequences."""

    def __init__(self, rt: LlamaRuntime, max_new: int, chunk: int) -> None:
        self.rt = rt
        self.max_new = max_new
        self.chunk = chunk
        self.newline = rt.tokenize("\n")[-1]

    # -- primitives ---------------------------------------------------------------------------
    def _rows(self, rows: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        """Decode ``rows`` in one pass; copies of the logits of the rows that asked."""
        self.rt.decode_rows(rows)
        return [self.rt.logits_row(i).copy() for i, r in enumerate(rows) if r[3]]

    def _prefill(self, tokens: list[int], seq: int, start: int = 0,
                 chunk: int | None = None) -> np.ndarray:
        """Decode ``tokens`` at ``start..`` in passes of ``chunk`` rows; the last row's logits."""
        step = chunk or len(tokens)
        last = None
        for a in range(0, len(tokens), step):
            part = tokens[a:a + step]
            end = a + len(part) == len(tokens)
            out = self._rows([(t, start + a + i, seq, end and i == len(part) - 1)
                              for i, t in enumerate(part)])
            last = out[0] if out else last
        assert last is not None
        return last

    def _single_steps(self, first: np.ndarray, pos: int, path: list[int],
                      others: list[tuple[int, int]] | None = None) -> list[np.ndarray]:
        """Rows along ``path`` one token per pass (after ``first``, the prompt's last row);
        ``others`` (seq, next position) add one greedy row each to every pass."""
        rows = [first]
        for i, tok in enumerate(path[:-1]):
            batch = [(tok, pos + i, 0, True)]
            if others:
                batch += [(int(np.argmax(self._other_rows[j])), p + i, seq, True)
                          for j, (seq, p) in enumerate(others)]
            out = self._rows(batch)
            rows.append(out[0])
            if others:
                self._other_rows = out[1:]
        return rows

    # -- the reference and the shapes ---------------------------------------------------------
    def reference(self, prompt: list[int]) -> tuple[list[int], list[np.ndarray]]:
        """Greedy output one row per step after a one-pass prefill, with each row's logits."""
        self.rt.clear()
        row = self._prefill(prompt, 0)
        tokens: list[int] = []
        rows: list[np.ndarray] = []
        for _ in range(self.max_new):
            tok = int(np.argmax(row))
            tokens.append(tok)
            rows.append(row)
            if tok == self.newline or self.rt.is_eog(tok):
                break
            row = self._rows([(tok, len(prompt) + len(tokens) - 1, 0, True)])[0]
        return tokens, rows

    def shape(self, mode: str, prompt: list[int], path: list[int],
              neighbours: list[list[int]]) -> list[np.ndarray]:
        """The rows of ``path`` after ``prompt`` computed in shape ``mode``."""
        rt, n = self.rt, len(prompt)
        rt.clear()
        if mode == "verify":
            self._prefill(prompt[:-1], 0)
            return self._rows([(t, n - 1 + i, 0, True)
                               for i, t in enumerate([prompt[-1]] + path[:-1])])
        if mode == "chunked":
            return self._single_steps(self._prefill(prompt, 0, chunk=self.chunk), n, path)
        if mode == "cached":
            other = neighbours[0]
            self._prefill(other, 0)
            keep = next((i for i, (a, b) in enumerate(zip(prompt, other, strict=False))
                         if a != b), min(len(prompt), len(other)))
            keep = min(keep, n - 1)
            rt.truncate(keep, 0)
            return self._single_steps(self._prefill(prompt[keep:], 0, start=keep), n, path)
        if mode == "shared":
            others = []
            self._other_rows = []
            for seq, other in enumerate(neighbours[:OTHERS], start=1):
                self._other_rows.append(self._prefill(other, seq))
                others.append((seq, len(other)))
            return self._single_steps(self._prefill(prompt, 0), n, path, others)
        raise ValueError(f"unknown mode {mode!r}")


def compare(stats: ModeStats, path: list[int], ref_rows: list[np.ndarray],
            rows: list[np.ndarray]) -> None:
    """Fold one sentence's rows in shape X into ``stats`` (against the reference rows)."""
    first_flip = None
    for i, (ref, got) in enumerate(zip(ref_rows, rows, strict=True)):
        stats.deltas.append(float(np.max(np.abs(ref - got))))
        top1, top2 = np.argpartition(-ref, 2)[:2]
        stats.gap_shifts.append(abs(float((ref[top1] - ref[top2]) - (got[top1] - got[top2]))))
        if int(np.argmax(got)) != path[i]:
            stats.flips += 1
            if first_flip is None:
                first_flip = i
    if first_flip is not None:
        stats.first_flip_gaps.append(top2_gap(ref_rows[first_flip]))


def gap_spread(ref_rows: list[np.ndarray], shaped: list[list[np.ndarray]]) -> list[float]:
    """Per row, how far apart the reference's top-2 gap lies across ALL shapes (the
    reference included): two shapes' outputs can part only where a gap is below this."""
    spreads = []
    for i, ref in enumerate(ref_rows):
        top1, top2 = np.argpartition(-ref, 2)[:2]
        gaps = [float(r[top1] - r[top2]) for r in [ref] + [rows[i] for rows in shaped]]
        spreads.append(max(gaps) - min(gaps))
    return spreads


def run(rt: LlamaRuntime, sources: list[str], langs: list[str], max_new: int,
        chunk: int) -> dict:
    probe = NumericsProbe(rt, max_new, chunk)
    fmt = FewShotFormat()
    stats = {m: ModeStats() for m in MODES}
    ref_gaps: list[float] = []
    spreads: list[float] = []
    jobs = [(s, lang) for lang in langs for s in sources]
    prompts = [rt.tokenize(fmt.translation(s, "en", lang).text, add_bos=True)
               for s, lang in jobs]
    for k in tqdm(range(len(jobs)), desc="numerics", unit="sentence"):
        prompt = prompts[k]
        neighbours = [prompts[(k + j) % len(prompts)] for j in range(1, OTHERS + 1)]
        if len(prompts) == 1:
            neighbours = [prompt[: len(prompt) // 2] + prompt[-2:]] * OTHERS
        path, ref_rows = probe.reference(prompt)
        ref_gaps += [top2_gap(r) for r in ref_rows]
        shaped = []
        for mode in MODES:
            rows = probe.shape(mode, prompt, path, neighbours)
            compare(stats[mode], path, ref_rows, rows)
            shaped.append(rows)
        spreads += gap_spread(ref_rows, shaped)
    noise = max(spreads, default=0.0)
    gaps = np.asarray(ref_gaps or [np.inf])
    return {
        "sentences": len(jobs),
        "reference_rows": len(ref_gaps),
        "noise_max": noise,  # the largest gap spread across shapes: the tests' tolerance
        "gap_spread_p50": float(np.percentile(spreads or [0.0], 50)),
        "gap_spread_p99": float(np.percentile(spreads or [0.0], 99)),
        "rows_with_gap_below_noise": int((gaps < noise).sum()),
        "modes": {m: s.summary(len(jobs)) for m, s in stats.items()},
    }


def _table(result: dict) -> Table:
    table = Table(["shape", "rows", "|Δ| p50", "|Δ| p99", "|Δ| max", "gap shift p99",
                   "gap shift max", "rows flipped",
                   "outputs diverged", "max top-2 gap at divergence"],
                  title=f"Logits vs one row per step, {result['sentences']} greedy "
                        f"generations ({result['reference_rows']} rows)")
    for mode, s in result["modes"].items():
        gap = s["gap_at_divergence_max"]
        table.add(mode, s["rows"], f"{s['delta_p50']:.4f}", f"{s['delta_p99']:.4f}",
                  f"{s['delta_max']:.4f}", f"{s['gap_shift_p99']:.4f}",
                  f"{s['gap_shift_max']:.4f}", s["flipped_rows"],
                  f"{s['diverged_sentences']}/{s['sentences']}",
                  "-" if gap is None else f"{gap:.4f}")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans bench numerics", description=__doc__,
                                 formatter_class=PlainHelp)
    add_model_options(ap)
    ap.add_argument("--flores-dir", type=Path, default=SAMPLES,
                    help="FLORES-200 folder holding dev/ (default: the three sentences "
                         "shipped in eval/samples; give your copy of FLORES-200 and "
                         "--limit 200 for figures worth reading)")
    ap.add_argument("--limit", type=positive_int, default=200,
                    help="source sentences to translate (per target language)")
    ap.add_argument("--langs", default=["de"], type=language_list,
                    help="comma-separated target languages")
    ap.add_argument("--max-new", type=positive_int, default=48,
                    help="most tokens generated per sentence")
    ap.add_argument("--chunk", type=positive_int, default=32,
                    help="prompt rows per pass in the 'chunked' shape")
    ap.add_argument("--out", type=Path, default=Path("results/numerics"),
                    help="folder for numerics.json and numerics.md")
    args = ap.parse_args(argv)
    sources = read_flores(args.flores_dir, "dev", "en")[: args.limit]
    rt = load_model(ModelSettings(model=args.model, n_threads=args.n_threads,
                                  parallel=1 + OTHERS)).runtime
    result = run(rt, sources, args.langs, args.max_new, args.chunk)
    table = _table(result)
    show([table, f"spread of a top-2 gap across all shapes: p50 {result['gap_spread_p50']:.4f}, "
                 f"p99 {result['gap_spread_p99']:.4f}, max {result['noise_max']:.4f} (outputs "
                 "of two shapes can part only where the gap is below it); reference rows "
                 f"whose top-2 gap is below the max: {result['rows_with_gap_below_noise']} "
                 f"of {result['reference_rows']}"])
    for path in write_results(args.out, "numerics", [result], table):
        print(f"wrote {path}")
    return 0
