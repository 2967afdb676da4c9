from drafters.chain import DrafterChain
from drafters.dictionary import DictionaryDrafter
from eval.emulator import EmulationResult, emulate_sequence


def test_emulation_counts_steps_and_acceptance() -> None:
    d = DictionaryDrafter.from_entries({(1,): (2, 3), (5,): (9,)})
    chain = DrafterChain([d], budget=4, adaptive=False)
    result = EmulationResult()
    # step 1: history [] -> no proposal, emit 1; step 2: propose 2 3 -> both accepted + 4;
    # step 3: after 4 nothing; emit 5; step 4: propose 9, reject, emit 6
    emulate_sequence(chain, [1, 2, 3, 4, 5, 6], [], 4, result)
    assert result.tokens == 6 and result.steps == 4
    assert result.proposal_steps == 2 and result.proposed == 3 and result.accepted == 2
    assert result.speedup == 1.5 and result.mal == 1.0


def test_cost_aware_speedup_charges_proposed_tokens() -> None:
    r = EmulationResult(tokens=6, steps=4, proposal_steps=2, proposed=3, accepted=2)
    assert r.cost_speedup(0.0) == r.speedup
    assert r.cost_speedup(1.0) == 6 / 7
