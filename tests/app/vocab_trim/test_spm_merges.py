"""Replaying SentencePiece merges, on toy vocabularies and against llama.cpp's tokenizer."""

from __future__ import annotations

from app.vocab_trim.spm_merges import merge_closure, merge_pieces


def test_the_best_scoring_pair_merges_first() -> None:
    scores = {"ab": -1.0, "bc": -0.5, "abc": -3.0, "bcd": -2.0, "abcd": -9.0}
    # "bc" outscores "ab"; then "a" + "bcd" is the only pair that is a token
    assert merge_pieces("abcd", scores) == ["bc", "bcd", "abcd"]
    assert merge_pieces("abce", scores) == ["bc", "abc"]


def test_ties_merge_the_leftmost_pair() -> None:
    scores = {"aa": -1.0, "aaa": -2.0}
    assert merge_pieces("aaa", scores) == ["aa", "aaa"]
    assert merge_pieces("aaaa", scores) == ["aa", "aa"]  # "aaaa" is no token


def test_a_single_character_has_no_pieces() -> None:
    assert merge_pieces("x", {"x": 0.0}) == []
    assert merge_pieces("", {}) == []


def test_closure_adds_only_the_intermediate_pieces() -> None:
    scores = {"▁t": -1.0, "he": -2.0, "▁the": -3.0, "▁th": -10.0}
    assert merge_pieces("▁the", scores) == ["▁t", "he", "▁the"]
    assert merge_closure(["▁the"], scores) == {"▁t", "he"}


def test_replay_agrees_with_llama_cpp_on_the_real_vocabulary(vocab) -> None:
    """For tokens of many kinds, llama.cpp tokenizes a token's own text to that token
    exactly when the replay's last piece is the whole text."""
    from app.model_files import default_model_path
    from app.vocab_trim.gguf_rewrite import open_gguf, token_table
    from app.vocab_trim.selection import NORMAL

    table = token_table(open_gguf(default_model_path()))
    scores = {t: float(s) for t, s, k in zip(table.tokens, table.scores, table.types,
                                             strict=True) if k == NORMAL}
    checked = 0
    for token_id in range(300, len(table), 997):
        text = table.tokens[token_id]
        if table.types[token_id] != NORMAL or len(text) < 2:
            continue
        ids = vocab.tokenize(text.replace("▁", " "))
        reaches = merge_pieces(text, scores)[-1:] == [text]
        assert (ids == [token_id]) == reaches, (token_id, text, ids)
        checked += 1
    assert checked > 200
