"""Command lines of the offline drafter-table builders: ``livetrans build-dict``,
``livetrans build-trigram`` and ``livetrans fertility``.

They load a model's vocabulary (``app.engine.vocab``) and call the builders of
``drafters.build``; keeping them here lets the ``drafters`` package import nothing from
``app``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from app.loader import load_vocab
from app.usage import PlainHelp, add_model_options, language, language_and_path
from drafters.build import ORDERS, build_dictionary, fertility, read_lines

BUILD_DICT_HELP = """Build a DictSpec dictionary drafter table from a monolingual corpus.

Counts frequent words and word n-grams (orders n1, n12, n123), tokenizes each with the
target model's tokenizer, and keeps for each token prefix its most probable continuation
when that probability reaches --p-min; the --size most frequent prefixes are kept
(DictSpec, section 3.1)."""


def _add_corpus_options(ap: argparse.ArgumentParser) -> None:
    """The corpus and tokenizer options both table builders take."""
    ap.add_argument("--corpus", type=Path, required=True, help="monolingual text, a line each")
    ap.add_argument("--lang", required=True, type=language,
                    help="language of the corpus, ISO 639-1 (e.g. de; zh and ja are "
                         "segmented into words)")
    ap.add_argument("--max-lines", type=int, default=None,
                    help="read at most this many corpus lines (default: all)")
    add_model_options(ap, threads=False)


def build_dict_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans build-dict", description=BUILD_DICT_HELP,
                                 formatter_class=PlainHelp)
    _add_corpus_options(ap)
    ap.add_argument("--orders", choices=sorted(ORDERS), default="n123",
                    help="word n-grams counted: n1 words, n12 up to bigrams, n123 up to "
                         "trigrams")
    ap.add_argument("--size", type=int, default=200_000,
                    help="token prefixes kept, the most frequent first")
    ap.add_argument("--p-min", type=float, default=0.2,
                    help="least probability of a prefix's continuation for it to be kept "
                         "(0.2 emulated best on FLORES dev for de, zh, ja, uk)")
    ap.add_argument("--min-count", type=int, default=1,
                    help="n-grams seen fewer times in the corpus are dropped")
    ap.add_argument("--out", type=Path, required=True,
                    help="dictionary file to write (serve reads <dict-dir>/<lang>.dict)")
    args = ap.parse_args(argv)
    vocab = load_vocab(args.model)
    drafter, header = build_dictionary(args.corpus, args.lang, vocab, args.orders, args.size,
                                       args.p_min, args.max_lines, args.min_count)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    drafter.save(args.out)
    header["file_bytes"] = args.out.stat().st_size
    print(json.dumps(header, ensure_ascii=False, indent=2))
    return 0


def build_trigram_main(argv: list[str] | None = None) -> int:
    from drafters.trigram import build_trigram

    ap = argparse.ArgumentParser(prog="livetrans build-trigram",
                                 description="sparse trigram drafter table from a corpus",
                                 formatter_class=PlainHelp)
    _add_corpus_options(ap)
    ap.add_argument("--out", type=Path, required=True,
                    help="table file to write (serve reads <dict-dir>/<lang>.trigram.npz)")
    args = ap.parse_args(argv)
    vocab = load_vocab(args.model)
    t0 = time.perf_counter()
    drafter = build_trigram(read_lines(args.corpus, args.max_lines), args.lang, vocab)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    drafter.save(args.out)
    print(json.dumps({"contexts": drafter.n_contexts, "bigram_contexts": drafter.n_bigrams,
                      "build_s": round(time.perf_counter() - t0, 1),
                      "file_bytes": args.out.stat().st_size}))
    return 0


def fertility_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="livetrans fertility",
                                 description="tokens per word, per language and tokenizer",
                                 formatter_class=PlainHelp)
    ap.add_argument("--file", type=language_and_path, action="append", required=True,
                    help="LANG=PATH, repeatable (e.g. de=eval/samples/mono/de.txt)")
    add_model_options(ap, threads=False)
    ap.add_argument("--max-lines", type=int, default=None,
                    help="read at most this many lines of each file (default: all)")
    args = ap.parse_args(argv)
    vocab = load_vocab(args.model)
    print(f"tokenizer: {vocab.model_name}")
    for lang, path in args.file:
        value = fertility(read_lines(path, args.max_lines), lang, vocab)
        print(f"{lang}\t{value:.2f}")
    return 0
