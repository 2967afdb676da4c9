from eval.metrics.speed import final_caption_ms, speed, speedup


def test_speed_and_speedup() -> None:
    recs = [{"decode_ms": 100.0, "tokens": 5}, {"decode_ms": 300.0, "tokens": 15}]
    s = speed(recs)
    assert s["decode_s"] == 0.4 and s["tokens_per_s"] == 50.0
    assert speedup(0.2, 0.4) == 2.0


def test_final_caption_time_uses_the_final_update_and_prefers_end_to_end() -> None:
    streams = [[{"decode_ms": 1.0}, {"decode_ms": 10.0}],
               [{"decode_ms": 2.0}, {"decode_ms": 20.0, "e2e_ms": 30.0}]]
    out = final_caption_ms(streams)
    assert out["final_ms_p50"] == 20.0  # between 10 and 30
    assert 10.0 < out["final_ms_p95"] <= 30.0
