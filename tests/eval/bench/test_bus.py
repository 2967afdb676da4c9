"""``livetrans bench bus``: the per-viewer accounting of finals (no servers), the faults on a
real redis-server, and, end to end, a small fault run on the sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.bench.bus.bench import main
from eval.bench.bus.faults import FaultInjector, check_fault_target, parse_faults
from eval.bench.bus.results import (
    Delivery,
    FaultRun,
    Talk,
    ViewerLog,
    fault_table,
    legacy_run,
    phase,
    speaker_finals,
)
from eval.redis_process import RedisProcess
from tests.redis_server import REDIS_SERVER, redis_server

SAMPLE = Path(__file__).resolve().parents[3] / "eval" / "samples" / "flores_layout"
WINDOW = (10.0, 20.0)
FINALS = {0: 5.0, 1: 15.0, 2: 25.0}  # segment -> when the speaker got its final


def viewer(*frames: tuple[int, bool, float], same: bool = False, ended: bool = True
           ) -> ViewerLog:
    view = ViewerLog(same, ended=ended)
    for segment, final, t in frames:
        view.add({"segment": segment, "revision": 0, "final": final}, t)
    return view


def test_a_viewer_that_saw_each_final_once_in_order_has_nothing_against_it() -> None:
    d = Delivery()
    d.add(FINALS, viewer((0, False, 4.0), (0, True, 5.1), (1, True, 15.2), (2, True, 25.3)),
          WINDOW)
    assert (d.delivered, d.expected, d.missed, d.duplicated, d.out_of_order) == (3, 3, 0, 0, 0)
    assert (d.partials, d.unexpected, d.lost_viewers) == (1, 0, 0)


def test_missed_duplicated_out_of_order_and_unexpected_finals_are_each_counted() -> None:
    d = Delivery()
    d.add(FINALS, viewer((2, True, 25.1), (0, True, 26.0), (2, True, 26.1), (9, True, 27.0),
                         ended=False), WINDOW)
    assert d.delivered == 2 and d.expected == 3
    assert d.missed == 1  # segment 1 never came
    assert d.duplicated == 1  # segment 2 twice
    assert d.out_of_order == 1  # segment 0 after segment 2
    assert d.unexpected == 1  # segment 9: the speaker never had it
    assert d.lost_viewers == 1


def test_latency_is_split_by_when_the_speaker_got_the_final() -> None:
    assert [phase(t, WINDOW) for t in (9.9, 10.0, 20.0, 20.1)] == [
        "before", "during", "during", "after"]
    assert phase(30.0, None) == "before"
    d = Delivery()
    # segment 1's final came during the fault and reached the viewer only after it
    d.add(FINALS, viewer((0, True, 5.5), (1, True, 21.0), (2, True, 25.25)), WINDOW)
    assert d.delays["before"] == [pytest.approx(500.0)]
    assert d.delays["during"] == [pytest.approx(6000.0)]
    assert d.delays["after"] == [pytest.approx(250.0)]
    assert d.latency("during") == (6000.0, 6000.0)


def test_a_talk_is_reported_per_replica_and_as_a_table_row() -> None:
    sent = {(0, 0, False): 4.0, (0, 1, True): 5.0, (1, 0, True): 15.0, (1, 0, False): 14.0}
    assert speaker_finals(sent) == {0: 5.0, 1: 15.0}
    talk = Talk("r", [viewer((0, True, 5.0), (1, True, 15.0), same=True),
                      viewer((0, True, 5.2), same=False)], sent=sent, updates=4, t0=1.0,
                window=(12.0, 19.0))
    run = FaultRun("kill", 2)
    run.record(talk)
    s = run.summary()
    assert (s["finals"], s["missed"], s["duplicated"]) == (2, 1, 0)
    assert s["fault_window_s"] == (11.0, 18.0)
    assert s["finals_delivered_same"] == 2 and s["finals_expected_other"] == 2
    assert s["latency_other_before_p50_ms"] == 200.0
    row = fault_table([run], 2).rows[0]
    assert row[:5] == ["kill", "11.0-18.0", "2", "2 / 2", "1 / 2"] and row[5] == "1 / 0 / 0"
    json.dumps(s)  # the --out file takes it as it is


def test_the_no_fault_comparison_counts_every_frame_s_delay_and_missed_finals() -> None:
    sent = {(0, 0, False): 1.0, (0, 0, True): 2.0}
    talk = Talk("r", [viewer((0, False, 1.1), (0, True, 2.2), same=True),
                      viewer((0, False, 1.3), same=False)], sent=sent, updates=2, wall_s=1.0)
    s = legacy_run("two replicas on Redis", talk).summary()
    assert (s["finals"], s["viewer_frames"], s["missed_finals"]) == (1, 3, 1)
    assert s["ms_per_update"] == 500.0 and s["delay_other_p50_ms"] == 300.0


def test_faults_are_parsed_and_refused_where_they_cannot_be_injected() -> None:
    assert parse_faults("none, kill,foreign") == ["none", "kill", "foreign"]
    with pytest.raises(Exception, match="unknown fault 'crash'"):
        parse_faults("kill,crash")
    assert check_fault_target(["kill"], None) is None
    assert check_fault_target(["none"], "redis://10.0.0.5:6379/0") is None
    assert "redis-server this bench starts" in check_fault_target(
        ["kill", "pause"], "redis://127.0.0.1:6379/0")
    assert "loopback" in check_fault_target(["oom"], "redis://10.0.0.5:6379/0")
    assert check_fault_target(["oom"], "redis://localhost:6379/0") is None


def test_the_command_refuses_process_faults_on_a_redis_it_did_not_start(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--flores-dir", str(SAMPLE), "--faults", "restart",
              "--room-bus", "redis://127.0.0.1:6379/0"])
    assert exc.value.code == 2
    assert "needs the redis-server this bench starts" in capsys.readouterr().err


@pytest.fixture
def redis_process(tmp_path: Path):
    with redis_server(tmp_path / "redis", persist=True) as process:
        yield process


def _client(process: RedisProcess):
    import redis

    return redis.Redis.from_url(process.url, socket_timeout=5, decode_responses=True)


def test_oom_is_healed_to_the_maxmemory_redis_had(redis_process: RedisProcess) -> None:
    client = _client(redis_process)
    client.config_set("maxmemory", 1 << 30)
    injector = FaultInjector("oom", redis_process.url, redis_process)
    injector.inject()
    with pytest.raises(Exception, match="maxmemory"):
        client.set("k", "v")
    injector.heal()
    injector.heal()  # a second heal (the cleanup's) changes nothing
    assert client.config_get("maxmemory")["maxmemory"] == str(1 << 30)
    assert client.set("k", "v")
    client.close()


def test_a_restart_keeps_the_data_and_foreign_junk_lands_on_the_rooms_keys(
        redis_process: RedisProcess) -> None:
    client = _client(redis_process)
    client.set("kept", "1")
    restart = FaultInjector("restart", redis_process.url, redis_process)
    restart.inject()
    assert redis_process.proc is None
    restart.heal()
    assert client.get("kept") == "1"  # a new connection, same port, the append-only file
    foreign = FaultInjector("foreign", redis_process.url, redis_process)
    foreign.room = "r1"
    foreign.inject()
    assert {client.type(f"livetrans:{k}:r1") for k in ("finals", "partials", "room")} == {
        "stream"}
    foreign.heal()
    client.close()


def test_process_faults_need_the_bench_s_own_redis() -> None:
    with pytest.raises(ValueError, match="own redis-server"):
        FaultInjector("pause", "redis://127.0.0.1:1/0", None)


def test_a_small_fault_run_delivers_every_final_once_in_order(tmp_path: Path,
                                                              capsys) -> None:
    if REDIS_SERVER is None:
        pytest.skip("redis-server missing (make system-deps installs it)")
    code = main(["--flores-dir", str(SAMPLE), "--sentences", "2", "--viewers", "4",
                 "--faults", "kill,foreign", "--fault-s", "2", "--out", str(tmp_path)])
    assert code == 0, capsys.readouterr().out
    runs = json.loads((tmp_path / "bus_faults.json").read_text())
    assert [r["fault"] for r in runs] == ["kill", "foreign"]
    for r in runs:
        assert r["finals"] == 2, r
        assert (r["missed"], r["duplicated"], r["out_of_order"], r["unexpected"]) == (
            0, 0, 0, 0), r
        assert r["finals_delivered_same"] == r["finals_expected_same"] == 4, r
        assert r["finals_delivered_other"] == r["finals_expected_other"] == 4, r
        assert r["lost_viewers"] == 0 and r["fault_window_s"] is not None, r
    assert runs[1]["skipped_entries"] > 0  # the junk reached the replicas and was skipped
    assert (tmp_path / "bus_faults.md").read_text().lstrip().startswith("**Redis faults")
