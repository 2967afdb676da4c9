from eval.metrics.erasure import erasures, lcp_len, ne_unit, normalized_erasure, units


def test_ne_by_hand() -> None:
    # Y1 = "a b", Y2 = "a c d" (erase "b": 1), Y3 = "a c d e" (erase 0) -> NE = 1 / 4
    stream = ["a b", "a c d", "a c d e"]
    assert erasures([s.split() for s in stream]) == [1, 0]
    assert normalized_erasure([stream], "word") == 0.25
    # two streams: erasures summed over final lengths summed
    other = ["x y z", "w"]  # erase 3, final length 1
    assert normalized_erasure([stream, other], "word") == (1 + 3) / (4 + 1)


def test_units_and_lcp() -> None:
    assert units("天气 好", "char") == ["天", "气", "好"]
    assert units("Hallo, Welt!", "13a") == ["Hallo", ",", "Welt", "!"]
    assert lcp_len([1, 2, 3], [1, 2, 4]) == 2
    assert ne_unit("de") in ("13a", "flores101") and ne_unit("zh") in ("zh", "flores101")
