from eval.metrics.acceptance import acceptance
from eval.metrics.speed import speed, speedup


def test_ad_and_ao_counts() -> None:
    records = [{"drafted": 10, "accepted": 8, "tokens": 12, "decode_ms": 100.0},
               {"drafted": 0, "accepted": 0, "tokens": 4, "decode_ms": 60.0}]
    a = acceptance(records)
    assert a["A/D"] == 0.8 and a["A/O"] == 0.5
    s = speed(records)
    assert s["decode_s"] == 0.16 and s["tokens_per_s"] == 100.0
    assert speedup(0.1, 0.2) == 2.0
    assert acceptance([{"drafted": 0, "accepted": 0, "tokens": 0}])["A/D"] is None
