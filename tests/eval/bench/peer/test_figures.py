"""``llama-server-bench --live``'s figures (``eval.bench.peer.figures``): llama-server itself is not
part of livetrans and is not run here; what is made of the records is."""

from __future__ import annotations

from eval.bench.peer.figures import (
    MethodRun,
    UpdateRecord,
    breakdown_table,
    mean_timings,
    speed_table,
    summarize,
)
from eval.datasets.streams import Stream, lag_k_stream

SOURCES = ["The bakery opens at seven.", "We walked home in the rain today."]
REFS = ["Die Bäckerei öffnet um sieben.", "Wir gingen heute im Regen nach Hause."]


def _streams() -> list[Stream]:
    return [Stream(str(i), lag_k_stream(s, 3), reference=r)
            for i, (s, r) in enumerate(zip(SOURCES, REFS, strict=True))]


def _run(method: str, wall: float, outputs: list[list[str]], timings: dict) -> MethodRun:
    """One speaker: the run's wall time spread evenly over its updates."""
    run = MethodRun(method, "m.gguf", 1, wall_s=wall)
    ms = 1000 * wall / sum(len(texts) for texts in outputs)
    for i, texts in enumerate(outputs):
        for j, text in enumerate(texts):
            run.records.append(UpdateRecord(i, j == len(texts) - 1, text, ms, 5,
                                            dict(timings), index=j))
    return run


def test_summary_sets_livetrans_against_llama_server_on_the_same_streams() -> None:
    llama = _run("llama-ar", 4.0, [["Die Bäckerei", "Die Bäckerei öffnet um sieben."],
                                   ["Wir gingen im Regen heim."]],
                 {"llama_prompt_ms": 10.0, "llama_predicted_ms": 60.0, "llama_prompt_n": 4,
                  "llama_predicted_n": 5})
    ssbd = _run("livetrans-ssbd", 2.5, [["Die Bäckerei", "Die Bäckerei öffnet um sieben."],
                                        ["Wir gingen heute im Regen nach Hause."]],
                {"server_ms": 80.0, "forward_decode_ms": 50.0, "verify_rows": 3})
    s = summarize([llama, ssbd], _streams(), "de")
    assert s["livetrans-ssbd"]["speedup"] == 1.6
    assert s["livetrans-ssbd"]["speedup_wall"] == 1.6
    assert s["llama-ar"]["speedup"] == 1.0
    assert s["livetrans-ssbd"]["errors"] == 0 and s["livetrans-ssbd"]["common_updates"] == 3
    assert s["livetrans-ssbd"]["identical_finals"] == 1
    assert s["livetrans-ssbd"]["chrF_diff"][0] > 0
    assert s["livetrans-ssbd"]["chrF"] > s["llama-ar"]["chrF"]
    assert s["livetrans-ssbd"]["ne"] == 0.0  # each update only grew the text
    assert s["llama-ar"]["pathological_finals"] == 0
    # what the servers' own parts leave of the client's wait
    assert s["livetrans-ssbd"]["timings"]["outside_ms"] == round(2500 / 3 - 80, 2)
    assert s["llama-ar"]["timings"]["outside_ms"] == round(4000 / 3 - 70, 2)
    report = {("m.gguf", 1): s}
    speed = speed_table(report).markdown()
    assert "livetrans-ssbd" in speed and "1.6" in speed
    parts = breakdown_table(report).markdown()
    assert "forward_decode_ms" in parts and "llama_predicted_ms" in parts


def test_a_looping_final_counts_as_pathological() -> None:
    loop = "am Montag, am Dienstag, " * 8
    run = _run("llama-ar", 1.0, [[loop], ["Wir gingen im Regen heim."]], {})
    assert summarize([run], _streams(), "de")["llama-ar"]["pathological_finals"] == 1


def test_mean_timings_of_no_records_is_empty() -> None:
    assert mean_timings([]) == {}


def test_pass_figures_count_a_shared_pass_once_and_need_every_run_counted() -> None:
    from eval.bench.peer.figures import pass_figures

    a = _run("livetrans-ssbd", 2.0, [["Die Bäckerei öffnet um sieben."]], {})
    b = _run("livetrans-ssbd", 2.0, [["Die Bäckerei öffnet um sieben."]], {})
    a.passes, a.pass_rows = 40.0, 400.0
    b.passes, b.pass_rows = 40.0, 800.0
    # 80 passes for 2 updates, 1200 rows: 15 a pass; 4 s over 80 passes: 50 ms a pass
    assert pass_figures([a, b], 2) == {"passes_per_update": 40.0, "rows_per_pass": 15.0,
                                       "ms_per_pass": 50.0}
    b.passes = None  # a server without counters: no figure rather than half of one
    assert pass_figures([a, b], 2) == {}
    assert pass_figures([a], 0) == {}
    report = {("m.gguf", 1): summarize([a], _streams()[:1], "de")}
    assert "passes_per_update" in str(breakdown_table(report))


def test_cpu_figures_are_ms_an_update_of_the_process_and_its_main_thread() -> None:
    from eval.bench.peer.figures import cpu_figures

    a = _run("livetrans-ssbd", 2.0, [["Die Bäckerei öffnet um sieben."]], {})
    b = _run("livetrans-ssbd", 2.0, [["Die Bäckerei öffnet um sieben."]], {})
    a.cpu_s, a.main_thread_cpu_s = 3.0, 0.1
    b.cpu_s, b.main_thread_cpu_s = 5.0, 0.3
    assert cpu_figures([a, b], 4) == {"server_cpu_ms": 2000.0, "main_thread_cpu_ms": 100.0}
    b.main_thread_cpu_s = None  # no /proc there: no figure
    assert cpu_figures([a, b], 4) == {}


def test_speedup_counts_only_the_updates_both_sides_answered() -> None:
    """A method that fails its slow updates must not look faster for it: the speedup is
    over the updates llama-server and the method both answered; the errors are shown."""
    llama = _run("llama-ar", 3.0, [["Die", "Die Bäckerei öffnet um sieben."],
                                   ["Wir gingen im Regen heim."]], {})
    ssbd = _run("livetrans-ssbd", 1.0, [["Die", "Die Bäckerei öffnet um sieben."],
                                        ["Wir gingen im Regen heim."]], {})
    # the method failed the first stream's final, which took llama-server 2 s
    llama.records[1].wall_ms = 2000.0
    llama.records[0].wall_ms = llama.records[2].wall_ms = 500.0
    del ssbd.records[1]
    ssbd.failed("HTTPStatusError: 500", (0, 1))
    for r in ssbd.records:
        r.wall_ms = 500.0
    s = summarize([llama, ssbd], _streams(), "de")["livetrans-ssbd"]
    assert s["errors"] == 1 and s["common_updates"] == 2
    assert s["speedup"] == 1.0  # 1000 ms against 1000 ms, not 3000 against 1000
    assert s["speedup_wall"] == 3.0
    table = speed_table({("m.gguf", 1): summarize([llama, ssbd], _streams(), "de")})
    assert "errors" in table.headers


def test_loop_stops_are_counted() -> None:
    llama = _run("llama-ar", 1.0, [["Die"], ["Wir"]], {})
    llama.records[0].looped = True
    assert summarize([llama], _streams(), "de")["llama-ar"]["loop_stops"] == 1
