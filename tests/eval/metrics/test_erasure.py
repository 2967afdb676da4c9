from eval.metrics.erasure import NormalizedErasure, ne_unit, units


def test_ne_by_hand() -> None:
    # Y1 = "a b", Y2 = "a c d" (erase "b": 1), Y3 = "a c d e" (erase 0) -> NE = 1 / 4
    stream = ["a b", "a c d", "a c d e"]
    ne = NormalizedErasure("word")
    assert ne.corpus_score([stream]).score == 0.25
    # two streams: erasures summed over final lengths summed
    other = ["x y z", "w"]  # erase 3, final length 1
    assert ne.corpus_score([stream, other]).score == (1 + 3) / (4 + 1)
    assert ne.corpus_score([]).score == 0.0


def test_signature_follows_the_arguments() -> None:
    full = NormalizedErasure("13a")
    assert full.signature == "ne|tok:13a|agg:sum-erasure/sum-final-len|outputs:full|formula:ssbd-4"
    shown = NormalizedErasure("zh", display="mask-k", display_k=3)
    assert "tok:zh" in shown.signature and "outputs:display-mask-k:3" in shown.signature
    assert "outputs:display-stable|" in NormalizedErasure("char", display="stable").signature
    assert full.corpus_score([["a"]]).signature == full.get_signature()


def test_units() -> None:
    assert units("天气 好", "char") == ["天", "气", "好"]
    assert units("Hallo, Welt!", "13a") == ["Hallo", ",", "Welt", "!"]
    assert ne_unit("de") in ("13a", "flores101") and ne_unit("zh") in ("zh", "flores101")
