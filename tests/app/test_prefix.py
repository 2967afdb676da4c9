"""The common prefix and the erasure arithmetic built on it."""

from app.prefix import common_prefix, erasures, normalized_erasure


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix("abc", "abcd") == 3 and common_prefix([], [1]) == 0


def test_erasure_by_hand() -> None:
    stream = [["a", "b"], ["a", "c", "d"], ["a", "c", "d", "e"]]
    assert erasures(stream) == [1, 0] and erasures(stream[:1]) == []
    assert normalized_erasure([stream]) == 0.25
    assert normalized_erasure([stream, [["x", "y", "z"], ["w"]]]) == (1 + 3) / (4 + 1)
    assert normalized_erasure([]) == 0.0 and normalized_erasure([[]]) == 0.0
