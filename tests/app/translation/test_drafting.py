"""The per-request drafter chain and its tables: a table built for another vocabulary (the
full model's, against a trimmed one) is left out with one warning, never used."""

from __future__ import annotations

import logging

from app.translation.drafting import ChainBuilder
from drafters.trigram import TrigramDrafter

LINES = [[5, 6, 7, 8], [5, 6, 7, 9], [5, 6, 7, 8]]


def _table(tmp_path, vocab_size: int, tokenizer: str) -> None:
    table = TrigramDrafter.from_token_lines(LINES, vocab_size, tokenizer=tokenizer)
    table.save(tmp_path / "de.trigram.npz")


def test_a_table_of_this_tokenizer_is_used(tmp_path) -> None:
    _table(tmp_path, 100, "100:abc")
    chain = ChainBuilder(tmp_path, "100:abc", vocab_size=100).build(
        ["previous", "trigram"], "de")
    assert "trigram" in [d.name for d in chain.drafters]


def test_a_table_of_another_tokenizer_is_refused_with_one_warning(tmp_path, caplog) -> None:
    _table(tmp_path, 262144, "262144:full")
    builder = ChainBuilder(tmp_path, "75359:trimmed", vocab_size=75359)
    with caplog.at_level(logging.WARNING, logger="livetrans.drafting"):
        for _ in range(3):
            chain = builder.build(["previous", "trigram"], "de")
            assert "trigram" not in [d.name for d in chain.drafters]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rebuild it" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info]  # no traceback in the log


def test_an_old_table_without_identity_is_checked_by_size(tmp_path) -> None:
    _table(tmp_path, 262144, "")
    assert ChainBuilder(tmp_path, "75359:t", vocab_size=75359)._table("trigram", "de") is None
    assert ChainBuilder(tmp_path, "262144:f", vocab_size=262144)._table("trigram", "de")
