from dataclasses import dataclass

import pytest

from drafters.base import DraftContext
from drafters.chain import DrafterChain, build_chain


@dataclass
class Fixed:
    name: str
    tokens: list[int]

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        return self.tokens[:k]


def test_first_non_empty_proposal_wins_in_order() -> None:
    chain = DrafterChain([Fixed("a", []), Fixed("b", [1, 2]), Fixed("c", [3])], adaptive=False)
    p = chain.propose_from(DraftContext(history=[0]), 8)
    assert p.tokens == [1, 2] and p.source == "b"


def test_budget_cuts_and_adapts() -> None:
    chain = DrafterChain([Fixed("a", list(range(20)))], budget=4)
    assert len(chain.propose_from(DraftContext(history=[]), 10).tokens) == 4
    assert len(chain.propose_from(DraftContext(history=[]), 2).tokens) == 2
    chain.record(4, 4)
    assert chain.current_budget == 5
    chain.record(5, 0)
    assert chain.current_budget <= 3


def test_build_chain_keeps_order_and_rejects_unknown_names() -> None:
    available = {"ngram": Fixed("ngram", [1]), "previous": Fixed("previous", [2])}
    chain = build_chain(["previous", "dictionary", "ngram"], available)
    assert [d.name for d in chain.drafters] == ["previous", "ngram"]
    with pytest.raises(ValueError):
        build_chain(["bogus"], available)
    assert build_chain([], available) is None
