"""The bench's samples (``eval.bench.peer.samples``): where they begin, what they hold, and the
spread of a method's figures over them."""

from __future__ import annotations

from eval.bench.peer.samples import make_samples, sample_offsets, spread_table


def test_samples_are_spread_evenly_and_never_run_past_the_end() -> None:
    assert sample_offsets(997, 0, 20, 4) == [0, 326, 651, 977]
    assert sample_offsets(100, 10, 20, 1) == [10]
    assert sample_offsets(30, 0, 20, 3) == [0]  # too short for two: one sample
    assert sample_offsets(10, 20, 5, 2) == []
    assert sample_offsets(100, 0, 0, 2) == []


def test_a_sample_is_lag_k_streams_of_its_sentences_named_by_their_range() -> None:
    pairs = [(f"word{i} a b c", f"ref{i}") for i in range(10)] + [("", "empty")]
    samples = make_samples("flores dev", pairs, 0, 3, 2, 3)
    assert [s.name for s in samples] == ["flores dev 0-2", "flores dev 7-9"]
    first = samples[1].streams[0]
    assert first.reference == "ref7" and first.updates[-1].source == "word7 a b c"
    assert [u.is_final for u in first.updates] == [False, True]


def _row(file: str, speedup: float, diff: float, base: float, mine: float) -> dict:
    return {"file": file, "speedup": speedup, "chrF_diff": [diff, diff - 2, diff + 2],
            "errors": 0, "common_base_ms": base, "common_ms": mine}


def test_the_spread_pools_the_samples_and_gives_their_range() -> None:
    report = {("m.gguf flores dev 0-19", 1): {"livetrans-ssbd": _row("m.gguf", 2.0, 1.0,
                                                                      2000, 1000)},
              ("m.gguf acl dev 0-19", 1): {"livetrans-ssbd": _row("m.gguf", 1.0, -1.0,
                                                                   1000, 1000)}}
    t = spread_table(report)
    assert t.rows == [["m.gguf", "1", "livetrans-ssbd", "2", "0", "1.500",
                       "1.00 / 1.50 / 2.00", "-1.0 / +0.0 / +1.0"]]
