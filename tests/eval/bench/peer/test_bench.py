"""The llama-server benchmark's figures (the servers themselves are not part of livetrans
and are not run here: the bench is a baseline measurement tool)."""

from __future__ import annotations

from eval.bench.peer.bench import ModelRun, summary


def test_summary_compares_the_two_models_on_the_same_finals() -> None:
    refs = ["Der Zug fährt um acht.", "Danke an alle."]
    a = ModelRun("a:full.gguf", tokens=40, wall_s=2.0,
                 finals=["Der Zug fährt um acht.", "Danke allen."])
    b = ModelRun("b:trim.gguf", tokens=40, wall_s=1.25,
                 finals=["Der Zug fährt um acht.", "Danke an alle."])
    s = summary(a, b, refs)
    assert s["speedup_wall"] == 1.6 and s["speedup_tokens_per_s"] == 1.6
    assert s["identical_finals"] == 1 and s["finals"] == 2
    assert s["b:trim.gguf"]["chrF"] > s["a:full.gguf"]["chrF"]
    assert s["chrF_diff"][0] > 0
