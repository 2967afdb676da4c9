from app.engine.engine import ends_in_loop


def test_loops_are_detected_only_when_long_enough() -> None:
    assert ends_in_loop([9, 1, 2, 3, 4] * 3)
    assert ends_in_loop([5] * 12) and not ends_in_loop([5] * 11)
    assert ends_in_loop([0, 7, 8] * 4) and not ends_in_loop([0, 7, 8] * 3)
    assert not ends_in_loop(list(range(40)))
    assert not ends_in_loop([1, 2, 3, 4, 1, 2, 3, 4, 9])
