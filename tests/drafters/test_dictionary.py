from collections import Counter

from drafters.build import best_continuation, prefix_candidates, select_entries
from drafters.dictionary import DictionaryDrafter, encode_key


def test_token_ids_survive_saving_and_loading(tmp_path) -> None:
    """Continuations are packed 3 bytes per token on disk: every id up to 2^18 - 1 (and
    the byte boundaries) comes back from ``load``."""
    toks = (0, 1, 255, 256, 65535, 65536, 262143)
    path = tmp_path / "ids.dict"
    DictionaryDrafter.from_entries({(7,): toks, (8,): (3,)}, {"tokenizer": "t"}).save(path)
    loaded = DictionaryDrafter.load(path)
    assert loaded.lookup([7]) == list(toks) and loaded.lookup([8]) == [3]
    assert encode_key([1, 2]) != encode_key([2, 1])


def test_longest_suffix_wins(tmp_path) -> None:
    d = DictionaryDrafter.from_entries({(5,): (6,), (4, 5): (7, 8), (1,): (2,)},
                                       {"tokenizer": "t1"})
    assert d.lookup([9, 5]) == [6]
    assert d.lookup([3, 4, 5]) == [7, 8]
    assert d.lookup([3]) == []
    path = tmp_path / "x.dict"
    d.save(path)
    loaded = DictionaryDrafter.load(path, tokenizer_identity="t1")
    assert loaded.lookup([4, 5]) == [7, 8] and len(loaded) == 3
    assert loaded.header["tokenizer"] == "t1"


def test_loading_with_another_tokenizer_is_refused(tmp_path) -> None:
    import pytest

    from drafters.dictionary import DictionaryMismatchError

    path = tmp_path / "x.dict"
    DictionaryDrafter.from_entries({(1,): (2,)}, {"tokenizer": "t1"}).save(path)
    with pytest.raises(DictionaryMismatchError):
        DictionaryDrafter.load(path, tokenizer_identity="t2")


def test_best_continuation_does_not_split_a_word_over_its_followers() -> None:
    # "ler" ends the word in 3 + 3 + 2 sightings followed by different words
    conts = Counter({(1,): 3, (1, 7): 3, (1, 8): 2, (2,): 2})
    path, cum = best_continuation(conts, 10)
    assert path == (1,) and cum[0] == 0.8


def test_prefix_candidates_and_selection() -> None:
    tokenized = [([10, 11, 12], 5), ([10, 11, 13], 1), ([20, 21], 1)]
    cands = prefix_candidates(tokenized)
    entries = select_entries(cands, p_min=0.5, size=10, min_total=2)
    assert entries[(10,)] == (11, 12)
    assert (20,) not in entries  # seen once
    strict = select_entries(cands, p_min=0.9, size=10, min_total=1)
    assert strict[(10,)] == (11, 12)  # p(11 | 10) = 1
    assert (10, 11) not in strict  # p(12 | 10 11) = 5/6 < 0.9
