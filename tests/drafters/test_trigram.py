from drafters.base import DraftContext
from drafters.trigram import TrigramDrafter

V = 100


def _drafter(**kw) -> TrigramDrafter:
    lines = [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 5], [7, 2, 6], [9, 2, 6], [8, 2, 6]]
    return TrigramDrafter.from_token_lines(lines, V, min_prob=0.0, **kw)


def test_trigram_uses_two_tokens_of_context() -> None:
    d = _drafter()
    assert d.next_token(1, 2) == (3, 2 / 3)
    assert d.next_token(7, 2)[0] == 6


def test_rare_context_falls_back_to_the_bigram() -> None:
    d = _drafter(min_context_count=3)
    # (7, 2) was seen once: bigram row of 2 -> most frequent next is 3 or 6 (3 each)
    tok, p = d.next_token(7, 2)
    assert tok in (3, 6) and p == 0.5
    assert d.next_token(None, 3) == (4, 1.0)  # one token of history: bigram only


def test_greedy_proposal_rolls_over_its_own_guesses(tmp_path) -> None:
    d = _drafter()
    assert d.propose(DraftContext(history=[1, 2]), 3) == [3, 4]
    path = tmp_path / "t.npz"
    d.save(path)
    loaded = TrigramDrafter.load(path)
    loaded.min_prob = 0.0
    assert loaded.propose(DraftContext(history=[1, 2]), 3) == [3, 4]
    assert loaded.n_contexts == d.n_contexts
