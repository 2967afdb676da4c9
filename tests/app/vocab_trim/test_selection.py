"""Which tokens a trimmed vocabulary keeps, on a toy tokenizer table."""

from __future__ import annotations

import numpy as np

from app.vocab_trim.scripts import scripts_of
from app.vocab_trim.selection import (
    BYTE,
    CONTROL,
    NORMAL,
    USER_DEFINED,
    TokenTable,
    coverage,
    select_tokens,
)

TOKENS = ["<pad>", "<eos>", "<unused0>", "<0x41>", "<b>", "▁t", "he", "▁the", "▁дом", "▁cat",
          "▁dog", "a", "ж", "▁the▁cat", "日"]
TYPES = [CONTROL, CONTROL, CONTROL, BYTE, USER_DEFINED] + [NORMAL] * 10


def _table() -> TokenTable:
    scores = np.array([-1000.0] * 5 + [-float(i) for i in range(10)], dtype=np.float32)
    return TokenTable(TOKENS, scores, np.array(TYPES, dtype=np.int32))


def _ids(sel, *texts: str) -> set[int]:
    return {TOKENS.index(t) for t in texts} & set(sel.keep.tolist())


def test_kept_by_reason() -> None:
    seen = np.zeros(len(TOKENS), dtype=np.int64)
    seen[TOKENS.index("▁the▁cat")] = 3
    sel = select_tokens(_table(), seen, scripts_of(["en"]), top=1)
    kept = {TOKENS[i] for i in sel.keep}
    assert {"<pad>", "<eos>", "<0x41>", "<b>"} <= kept  # special, byte, user-defined
    assert "<unused0>" not in kept  # placeholders nothing produces
    assert "▁the▁cat" in kept  # seen
    assert "▁t" in kept  # frequent: the best-ranked Latin token (top=1)
    assert "a" in kept  # a single character of the script
    assert not {"▁дом", "ж", "日", "▁dog"} & kept  # other scripts; Latin but unseen, unranked
    assert sel.kept_by["special"] == 4 and sel.kept_by["seen"] == 1
    assert list(sel.keep) == sorted(sel.keep)  # the original order


def test_the_merge_pieces_of_kept_tokens_are_kept() -> None:
    seen = np.zeros(len(TOKENS), dtype=np.int64)
    seen[TOKENS.index("▁the")] = 1
    sel = select_tokens(_table(), seen, scripts_of(["en"]), top=0)
    assert {"he", "▁t"} <= {TOKENS[i] for i in sel.keep}
    assert sel.kept_by["merge"] == 1  # "he"; "▁t" is kept as a character of the script


def test_ids_named_by_the_metadata_are_always_kept() -> None:
    seen = np.zeros(len(TOKENS), dtype=np.int64)
    sel = select_tokens(_table(), seen, scripts_of(["en"]), top=0, always=[2])
    assert 2 in sel.keep and sel.kept_by["special"] == 5


def test_coverage_is_the_share_of_occurrences_kept() -> None:
    counts = np.array([3, 1, 0, 0])
    assert coverage(counts, np.array([0])) == 0.75
    assert coverage(np.zeros(4, dtype=np.int64), np.array([0])) == 1.0


def test_neutral_tokens_are_kept_only_when_asked() -> None:
    """Punctuation and digits belong to no script: ``serve --langs``'s copy, counted
    without a corpus, keeps them all (German quotes after a question mark: ``?“``)."""
    tokens = [*TOKENS, "?“", "▁(%)", "12", "ж?"]
    table = TokenTable(tokens, np.array([-1000.0] * 5 + [-float(i) for i in range(14)],
                                        dtype=np.float32),
                       np.array(TYPES + [NORMAL] * 4, dtype=np.int32))
    seen = np.zeros(len(tokens), dtype=np.int64)
    plain = {tokens[i] for i in select_tokens(table, seen, scripts_of(["de"]), top=0).keep}
    sel = select_tokens(table, seen, scripts_of(["de"]), top=0, neutral=True)
    kept = {tokens[i] for i in sel.keep}
    assert not {"?“", "▁(%)", "12"} & plain
    assert {"?“", "▁(%)", "12"} <= kept and "ж?" not in kept
    assert sel.kept_by["neutral"] == 3
