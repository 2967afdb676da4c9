"""room-voice-bench's bookkeeping: sentences tied to their commits, the first voiced audio
after each for the speaker and every listener, the room path, the summary and table."""

from __future__ import annotations

import numpy as np
import pytest

from eval.bench.interpreter.talk import Talk
from eval.bench.room_voice import Heard, _parser, rows_for, summary, table, voiced


def heard(*times: float) -> Heard:
    h = Heard()
    h.voiced_at = list(times)
    return h


def test_each_sentence_and_listener_gets_its_delays_from_the_speech_end() -> None:
    talk = Talk(["one.", "two."], np.zeros(10, np.int16), [1.0, 3.0])
    spoke = {"ends_at": [101.0, 103.0], "commits": [100.5, 103.4],
             "own": heard(100.6, 103.5)}
    ears = [{"heard": heard(100.9, 104.0)}, {"heard": heard(101.2)}]
    rows = rows_for(talk, spoke, ears)
    assert [(r["sentence"], r["listener"]) for r in rows] == [
        ("one.", 0), ("one.", 1), ("two.", 0), ("two.", 1)]
    first = rows[0]
    assert first["first_commit_s"] == -0.5 and first["speaker_hears_s"] == -0.4
    assert first["listener_hears_s"] == -0.1 and first["room_path_s"] == 0.3
    assert rows[3]["listener_hears_s"] is None and rows[3]["room_path_s"] is None
    result = {"rows": [{"room": 0, **r} for r in rows], "listener_bytes_per_s": 5000.0,
              "errors": [], "hls_bytes_per_s": 2100.0}
    s = summary(1, 2, result, cpu_s=3.0, wall_s=10.0)
    assert s["missed"] == 1 and s["sentences"] == 2 and s["server_cpu"] == 0.3
    assert s["listener_hears_s"]["n"] == 3
    md = table([s], {"cpu": "cpu", "cores": 2, "load_1m": 0.1},
               _parser().parse_args([])).markdown()
    assert "room path" in md and "5000.0" in md


def test_voiced_is_louder_than_silence() -> None:
    assert not voiced(np.zeros(480, np.int16)) and not voiced(np.zeros(0, np.int16))
    assert voiced((np.ones(480) * 2000).astype(np.int16))


@pytest.mark.parametrize("bad", [["--rooms", "0"], ["--listeners", "x"]])
def test_counts_are_checked(bad: list[str]) -> None:
    from eval.bench.room_voice import main

    with pytest.raises(SystemExit):
        main(bad)
