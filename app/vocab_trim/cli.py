"""``livetrans trim-vocab``: a copy of a model whose vocabulary holds only what some languages
use, so that every row of logits costs a fraction of the full output layer.

    livetrans trim-vocab --langs en,de --out models/gemma-en-de.gguf \\
        --corpus de=mono/de.txt --corpus en=flores200/dev/eng_Latn.dev

What is kept and why: ``app.vocab_trim.selection``; what changes in the file:
``app.vocab_trim.gguf_rewrite``. After writing, the new file's tokenizer is loaded and
checked: its size, its special tokens, and that text tokenizes to the same pieces as before
wherever the full tokenizer's pieces are all kept, and round-trips everywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from app.engine.vocab import LlamaVocab
from app.model_files import ModelFileError, resolve_model_path
from app.usage import (
    PlainHelp,
    UsageError,
    checked,
    count,
    language,
    language_and_path,
    positive_int,
    require_file,
)
from app.vocab_trim.counting import count_lines, count_prompts
from app.vocab_trim.gguf_rewrite import (
    TrimError,
    open_gguf,
    special_token_ids,
    token_table,
    write_trimmed,
)
from app.vocab_trim.output import atomic_output, check_output_path, describe
from app.vocab_trim.scripts import LANGUAGE_SCRIPTS, scripts_of
from app.vocab_trim.selection import REASONS, coverage, select_tokens

DEFAULT_TOP = 65536
CHECK_LINES = 2000  # lines of each corpus re-tokenized with the trimmed model

HELP = """\
Write a copy of a GGUF model that keeps only the tokens the given languages use.

Every row of logits costs the whole output layer: 262,144 tokens for Gemma 3, most of a
small model's work on a CPU. A translation into German never needs Cyrillic, Devanagari or
CJK tokens. The copy keeps every token the model's own tokenizer produces on the corpora
you give (text in those languages), the most frequent tokens of the languages' scripts,
their single characters, the control and byte tokens, and the pieces the tokenizer merges
through; the token embedding rows and tokenizer arrays are cut to match, byte for byte.
Text outside the kept set still tokenizes (in smaller pieces or bytes). Serve the copy
like any GGUF (serve --model OUT.gguf); rebuild drafter tables against it.
"""


def _languages(text: str) -> list[str]:
    """``en,de``: supported codes, normalised, each once, at least one."""
    langs: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if part and (lang := language(part)) not in langs:
            langs.append(lang)
    if not langs:
        raise argparse.ArgumentTypeError("name at least one language (e.g. en,de)")
    return langs


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="livetrans trim-vocab", description=HELP,
                                 formatter_class=PlainHelp)
    ap.add_argument("--model", default=None,
                    help="GGUF to trim (default: the bundled Gemma 3 270M)")
    ap.add_argument("--langs", type=_languages, required=True,
                    help="languages the model reads and writes, the source language too "
                         f"(e.g. en,de; known: {', '.join(sorted(LANGUAGE_SCRIPTS))})")
    ap.add_argument("--out", type=Path, required=True, help="GGUF file to write")
    ap.add_argument("--corpus", type=language_and_path, action="append", default=[],
                    help="LANG=PATH: text in one of --langs, a segment per line; repeatable. "
                         "More text keeps more of the words speakers use")
    ap.add_argument("--top", type=checked(count, "a whole number >= 0"),
                    default=DEFAULT_TOP,
                    help="also keep this many of the vocabulary's most frequent tokens that "
                         "are written in the languages' scripts")
    ap.add_argument("--min-count", type=checked(positive_int, "a whole number >= 1"),
                    default=1, help="a corpus token is kept when it occurs this often")
    ap.add_argument("--max-lines", type=checked(positive_int, "a whole number >= 1"),
                    default=None, help="read at most this many lines of each corpus")
    ap.add_argument("--check", type=language_and_path, action="append", default=[],
                    help="LANG=PATH: held-out text to report the kept set's coverage on "
                         "(not counted); repeatable")
    ap.add_argument("--report", type=Path, default=None,
                    help="also write the report (JSON) to this file")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        model = resolve_model_path(args.model)
    except ModelFileError as exc:
        raise UsageError(str(exc)) from None
    for _, path in args.corpus + args.check:
        require_file(path, "--corpus/--check")
    out, report_path = _check_outputs(args, model)
    for lang, path in args.corpus:
        if lang not in args.langs:
            raise UsageError(f"--corpus {lang}={path}: {lang} is not in --langs "
                             f"{','.join(args.langs)}")
    if "en" not in args.langs:
        print("note: en is not in --langs: English source text will be spelled in small "
              "pieces", file=sys.stderr)
    try:
        report = trim(model, args, out)
    except TrimError as exc:
        raise UsageError(f"cannot trim {model.name}: {exc}") from None
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if report_path is not None:
        _write_report(report_path, text)
    return 0


def _check_outputs(args: argparse.Namespace, model: Path) -> tuple[Path, Path | None]:
    """``--out`` and ``--report`` as the real paths to write, refused now (one line, nothing
    written) when they cannot be written: the work before writing takes seconds to
    minutes."""
    inputs = {"the model being trimmed": model}
    inputs |= {f"the --corpus/--check file {lang}={path}": path
               for lang, path in args.corpus + args.check}
    out = check_output_path(args.out, "--out", inputs)
    if args.report is None:
        return out, None
    return out, check_output_path(args.report, "--report",
                                  {**inputs, "the --out file": out})


def _write_report(path: Path, text: str) -> None:
    with atomic_output(path, lambda exc: UsageError(
            f"--report {path}: cannot write it ({describe(exc)})")) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")


def _read(path: Path, max_lines: int | None) -> list[str]:
    from drafters.build import read_lines

    try:
        return read_lines(path, max_lines)
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None


def trim(model: Path, args: argparse.Namespace, out: Path) -> dict:
    """Count, select, write, check; the report as a dict."""
    t0 = time.perf_counter()
    reader = open_gguf(model)
    table = token_table(reader)
    vocab = load_trim_vocab(model)
    if vocab.n_vocab != len(table):
        raise TrimError(f"llama.cpp reads {vocab.n_vocab} tokens but the metadata lists "
                        f"{len(table)}")
    counts = count_prompts(vocab, args.langs)
    corpora: dict[str, dict] = {}
    samples: list[tuple[str, str]] = []
    for lang, path in args.corpus:
        lines = _read(path, args.max_lines)
        c = count_lines(vocab, lines, lang)
        counts += c
        corpora[str(path)] = {"lang": lang, "lines": len(lines), "tokens": int(c.sum()),
                              "distinct": int((c > 0).sum())}
        samples += [(lang, line) for line in lines[:CHECK_LINES]]
    selection = select_tokens(table, counts, scripts_of(args.langs), top=args.top,
                              min_count=args.min_count,
                              always=special_token_ids(reader, len(table)))
    held_out = {}
    for lang, path in args.check:
        c = count_lines(vocab, _read(path, args.max_lines), lang)
        held_out[str(path)] = {"lang": lang, "token_coverage": round(
            coverage(c, selection.keep), 4)}
    write_trimmed(reader, selection.keep, out, args.langs, vocab.identity())
    check = check_trimmed(vocab, out, selection.keep, samples)
    vocab.close()
    return {
        "model": str(model), "out": str(out), "langs": args.langs,
        "tokens": {"before": len(table), "after": selection.size,
                   **{f"kept_{r}": selection.kept_by.get(r, 0) for r in REASONS}},
        "file_mb": {"before": round(model.stat().st_size / 1e6, 1),
                    "after": round(out.stat().st_size / 1e6, 1)},
        "corpora": corpora, "held_out": held_out, "check": check,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def load_trim_vocab(model: Path) -> LlamaVocab:
    """llama.cpp's tokenizer of ``model``; a file whose GGUF structure is sound but whose
    tokenizer llama.cpp refuses is a ``TrimError``, not a traceback."""
    import logging

    llama_log = logging.getLogger("livetrans.llama")  # its C error lines; ours is the one
    llama_log.disabled = True
    try:
        return LlamaVocab.load(model)
    except RuntimeError:
        raise TrimError("llama.cpp cannot load its vocabulary (damaged metadata, or a model "
                        "this llama.cpp does not support)") from None
    finally:
        llama_log.disabled = False


def check_trimmed(full: LlamaVocab, out: Path, keep: np.ndarray,
                  samples: list[tuple[str, str]]) -> dict:
    """Load the written file's tokenizer and compare it with the full one on ``samples``:
    same pieces where every full piece is kept, exact round trip everywhere."""
    from drafters.segment import leading

    trimmed = LlamaVocab.load(out)
    try:
        if trimmed.n_vocab != len(keep):
            raise TrimError(f"the written file has {trimmed.n_vocab} tokens, not {len(keep)}")
        old_to_new = {int(old): new for new, old in enumerate(keep)}
        same = comparable = round_trips = 0
        for lang, line in samples:
            text = leading(lang) + line
            before = full.tokenize(text)
            after = trimmed.tokenize(text)
            round_trips += trimmed.detokenize(after) == full.detokenize(before)
            if all(t in old_to_new for t in before):
                comparable += 1
                same += [old_to_new[t] for t in before] == after
        return {"lines": len(samples), "round_trip": round_trips,
                "all_pieces_kept": comparable, "same_pieces": same}
    finally:
        trimmed.close()
