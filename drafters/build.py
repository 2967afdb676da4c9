"""Offline drafter-table builders (their command lines are in ``app/table_tools.py``).

Dictionary construction follows DictSpec (section 3.1): count frequent words and word
n-grams (orders ``n1``, ``n12``, ``n123``), tokenize each with the target model's tokenizer
in the form the model emits it in running text (with its leading space in spaced
scripts), collect prefix -> continuation counts at every token split point (prefixes and
continuations capped at 8 tokens), keep for each prefix only its most probable
continuation if that probability reaches ``--p-min``, and keep the ``--size`` most
frequent prefixes.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from drafters.dictionary import MAX_KEY, DictionaryDrafter
from drafters.segment import leading, words

ORDERS = {"n1": 1, "n12": 2, "n123": 3}


def read_lines(path: Path, max_lines: int | None = None) -> list[str]:
    lines = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if max_lines is not None and i >= max_lines:
                break
            line = line.strip()
            if line:
                lines.append(line)
    return lines


Candidate = tuple[int, float, tuple[int, ...], tuple[int, ...]]  # total, p, prefix, cont


def best_continuation(conts: Counter[tuple[int, ...]], total: int
                      ) -> tuple[tuple[int, ...], list[float]]:
    """Grow the most probable continuation token by token.

    Counting whole continuations splits the mass of one word ending over every n-gram that
    goes on after it ("ler", "ler der", "ler haben"); instead take the most frequent first
    token, then the most frequent next token among continuations that share the path, and
    so on. Returns the path and the cumulative probability after each token.
    """
    path: list[int] = []
    cum: list[float] = []
    live = list(conts.items())
    mass = total
    p = 1.0
    while live and len(path) < MAX_KEY:
        nxt: Counter[int] = Counter()
        ended = 0
        for cont, c in live:
            if len(cont) > len(path):
                nxt[cont[len(path)]] += c
            else:
                ended += c
        if not nxt:
            break
        tok, c = nxt.most_common(1)[0]
        if c <= ended:  # stopping here is at least as likely as any next token
            break
        p *= c / mass
        path.append(tok)
        cum.append(p)
        live = [(cont, n) for cont, n in live if len(cont) > len(path) - 1
                and cont[len(path) - 1] == tok]
        mass = c
    return tuple(path), cum


def prefix_candidates(tokenized: Iterable[tuple[list[int], int]]) -> list[Candidate]:
    """For every prefix seen: its total count, its best continuation and that
    continuation's first-token probability, most frequent prefix first. The stored
    continuation keeps the tokens whose cumulative probability stays >= 0.5 of the first."""
    stats: dict[tuple[int, ...], Counter[tuple[int, ...]]] = defaultdict(Counter)
    for toks, count in tokenized:
        for i in range(1, len(toks)):
            prefix = tuple(toks[max(0, i - MAX_KEY):i])
            stats[prefix][tuple(toks[i:i + MAX_KEY])] += count
    out = []
    for prefix, conts in stats.items():
        total = sum(conts.values())
        path, cum = best_continuation(conts, total)
        if not path:
            continue
        keep = sum(1 for q in cum if q >= 0.5 * cum[0])
        out.append((total, cum[0], prefix, path[:keep]))
    out.sort(key=lambda x: -x[0])
    return out


def select_entries(cands: list[Candidate], p_min: float, size: int, min_total: int = 3
                   ) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The ``size`` most frequent prefixes whose best continuation has p >= ``p_min``,
    seen at least ``min_total`` times (a probability from one or two sightings is noise)."""
    entries: dict[tuple[int, ...], tuple[int, ...]] = {}
    for total, p, prefix, cont in cands:
        if total < min_total:
            break  # sorted by total: nothing frequent enough follows
        if p >= p_min:
            entries[prefix] = cont
            if len(entries) >= size:
                break
    return entries


def prefix_table(tokenized: Iterable[tuple[list[int], int]], p_min: float, size: int
                 ) -> tuple[dict[tuple[int, ...], tuple[int, ...]], dict]:
    cands = prefix_candidates(tokenized)
    entries = select_entries(cands, p_min, size)
    return entries, {"prefixes_seen": len(cands)}


def _word_spans(text: str, lang: str) -> list[tuple[int, int]]:
    """Byte (start, end) of each word in ``text``; in spaced scripts a word's start is the
    space before it, because that space belongs to the word's first token ("▁Wissen")."""
    spans = []
    pos = 0
    for w in words(text, lang):
        idx = text.find(w, pos)
        if idx < 0:
            continue
        start = idx - 1 if idx > 0 and text[idx - 1] == " " else idx
        spans.append((len(text[:start].encode()), len(text[:idx + len(w)].encode())))
        pos = idx + len(w)
    return spans


def tokenized_ngrams(
    lines: list[str], lang: str, vocab, max_order: int, min_count: int = 1,  # noqa: ANN001
    limit: int | None = None,
) -> list[tuple[int, list[int], int]]:
    """(order, tokens, count) of word n-grams *as tokenized in running text*.

    Each line is tokenized whole and n-grams are cut at token boundaries that coincide with
    word boundaries. Tokenizing an n-gram on its own can split a word differently from how
    the model writes it in a sentence (" Wissen|schaftler" alone, " Wissenschaft|ler" in
    context), and then the dictionary would never match the model's output.
    """
    counts: Counter[tuple[int, tuple[int, ...]]] = Counter()
    lead = leading(lang)
    for line in lines:
        text = lead + line
        toks = vocab.tokenize(text)
        starts: dict[int, int] = {}
        offset = 0
        for i, tok in enumerate(toks):
            starts[offset] = i
            offset += len(vocab.token_bytes(tok))
        starts[offset] = len(toks)
        spans = _word_spans(text, lang)
        for i, (b0, _) in enumerate(spans):
            first = starts.get(b0)
            if first is None:
                continue
            for n in range(1, max_order + 1):
                if i + n > len(spans):
                    break
                end_byte = spans[i + n][0] if i + n < len(spans) else spans[i + n - 1][1]
                last = starts.get(end_byte)
                if last is None or last - first < 1:
                    continue
                counts[(n, tuple(toks[first:last]))] += 1
    frequent = [(key, c) for key, c in counts.most_common(limit) if c >= min_count]
    return [(n, list(t), c) for (n, t), c in frequent]


def build_dictionary(
    corpus: Path, lang: str, vocab, orders: str = "n123", size: int = 200_000,  # noqa: ANN001
    p_min: float = 0.5, max_lines: int | None = None, min_count: int = 1,
    ngrams: list[tuple[int, list[int], int]] | None = None,
) -> tuple[DictionaryDrafter, dict]:
    """Build one dictionary; ``ngrams`` (from ``tokenized_ngrams``) skips the counting."""
    t0 = time.perf_counter()
    max_order = ORDERS[orders]
    if ngrams is None:
        ngrams = tokenized_ngrams(read_lines(corpus, max_lines), lang, vocab, max_order,
                                  min_count)
    chosen = ((toks, c) for order, toks, c in ngrams if order <= max_order)
    entries, info = prefix_table(chosen, p_min, size)
    corpus_hash = hashlib.sha256(corpus.read_bytes()).hexdigest()[:16]
    header = {
        "format": 1, "lang": lang, "tokenizer": vocab.identity(), "model": vocab.model_name,
        "orders": orders, "size": size, "p_min": p_min, "min_count": min_count,
        "max_lines": max_lines, "corpus": corpus.name, "corpus_sha256": corpus_hash,
        "ngrams_tokenized": len(ngrams), **info,
    }
    drafter = DictionaryDrafter.from_entries(entries, header)
    drafter.header["build_s"] = round(time.perf_counter() - t0, 1)
    return drafter, drafter.header


def fertility(lines: Iterable[str], lang: str, vocab) -> float:  # noqa: ANN001
    """Tokens per word: whitespace words, or segmented words for zh/ja (DictSpec Table 3)."""
    n_tokens = n_words = 0
    for line in lines:
        n_words += len(words(line, lang)) if lang in ("zh", "ja") else len(line.split())
        n_tokens += len(vocab.tokenize(" " + line if leading(lang) else line))
    return n_tokens / n_words if n_words else 0.0
