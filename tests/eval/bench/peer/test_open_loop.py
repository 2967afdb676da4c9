"""The open-loop run's sentences, scripts and tables (``eval.bench.peer.open_loop``); the
servers are not run here (llama-server is not part of livetrans): a stand-in speaker answers."""

from __future__ import annotations

import asyncio

from eval.bench.peer.figures import MethodRun, UpdateRecord
from eval.bench.peer.open_loop import (
    capacities,
    capacity_table,
    drive,
    latency_table,
    scripts_of,
    talk_of,
)
from eval.datasets.streams import Stream, lag_k_stream


def _pool(n: int) -> list[Stream]:
    return [Stream(str(i), lag_k_stream(f"s{i} one two three four", 3), reference=f"r{i}")
            for i in range(n)]


def test_speakers_take_the_pool_in_turn_and_start_again_when_it_runs_out() -> None:
    pool = _pool(3)
    talk = talk_of(pool, 2, 2)
    assert [s.id for s in talk] == ["0", "1", "2", "0"]
    scripts = scripts_of(talk, 2, 3, 1.2, None)
    # speaker 0 says sentences 0 and 2, speaker 1 sentences 1 and 3, 0.6 s later
    assert [{u.stream for u in s} for s in scripts] == [{0, 2}, {1, 3}]
    assert abs(scripts[1][0].t - scripts[0][0].t - 0.6) < 1e-9
    assert sum(len(s) for s in scripts) == sum(len(s.updates) for s in talk)


class InstantSpeaker:
    """Answers every update at once; fails the ones named."""

    def __init__(self, fail: set[tuple[int, int]] = frozenset()) -> None:
        self.fail = fail
        self.warm: list[tuple[int, int | None]] = []

    async def update(self, client, stream, source, final, index=0, slot=None):  # noqa: ANN001, ANN201
        if stream >= 1_000_000:
            self.warm.append((stream, slot))
        if (stream, index) in self.fail:
            raise ValueError("no")
        return UpdateRecord(stream, final, source.upper(), 1.0, 1, {"slot": slot},
                            index=index)


def test_every_speaker_is_driven_on_one_clock_and_failures_are_counted() -> None:
    talk = talk_of(_pool(2), 2, 1)
    scripts = scripts_of(talk, 2, 3, 0.01, None)
    run = MethodRun("x", "m.gguf", 2)
    speaker = InstantSpeaker({(1, 0)})
    captions, skipped = asyncio.run(drive(speaker, scripts, run))
    assert speaker.warm == [(1_000_000, 0), (1_000_001, 1)]  # one untimed update a slot
    assert run.errors == 1 and len(captions) == len(run.records) + 1
    assert sum(c.update.final for c in captions) == 2  # every final answered
    assert {r.timings["slot"] for r in run.records} == {0, 1}  # a slot a speaker
    assert all(r.stream < 2 for r in run.records)  # the warm-up is not recorded
    assert run.wall_s > 0 and skipped >= 0


def _row(p90: float, f90: float) -> dict:
    return {"partial_p50": p90 / 2, "partial_p90": p90, "partial_p99": p90 * 2,
            "final_p50": f90 / 2, "final_p90": f90, "final_p99": f90 * 2, "sent": 10,
            "skipped": 2, "errors": 0, "chrF": 30.0, "chrF_diff": [1.0, -1.0, 3.0],
            "pathological_finals": 0, "ne": 1.2, "load_1m_after": 0.5,
            "timings": {"server_ms": 100.0}}


def test_capacity_per_file_and_method_and_the_tables() -> None:
    report = {("m.gguf", 1): {"llama-ar": _row(0.8, 0.9), "livetrans-ssbd": _row(0.5, 0.8)},
              ("m.gguf", 2): {"llama-ar": _row(1.2, 1.3), "livetrans-ssbd": _row(0.6, 1.5)}}
    assert capacities(report, 1.0, 2.0) == {("m.gguf", "llama-ar"): 1,
                                            ("m.gguf", "livetrans-ssbd"): 2}
    table = latency_table(report).markdown()
    assert "0.40 / 0.80 / 1.60" in table and "+1.0 [-1.0, +3.0]" in table
    from eval.bench.peer.figures import breakdown_table

    assert "server_ms" in breakdown_table(report).markdown()
    caps = capacity_table(report, 1.0, 2.0)
    assert ["m.gguf", "livetrans-ssbd", "2", "1,2"] in caps.rows
