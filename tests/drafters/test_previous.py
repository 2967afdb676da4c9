from drafters.base import DraftContext
from drafters.previous import PreviousOutputDrafter


def test_rejoins_the_previous_translation() -> None:
    d = PreviousOutputDrafter()
    previous = [1, 2, 3, 4, 5, 6]
    assert d.propose(DraftContext(history=[], previous=previous), 3) == [1, 2, 3]
    # the new output changed token 2 but re-joined at 3
    assert d.propose(DraftContext(history=[1, 9, 3], previous=previous), 2) == [4, 5]
    assert d.propose(DraftContext(history=[7], previous=previous), 2) == []
    assert d.propose(DraftContext(history=[1], previous=[]), 2) == []
