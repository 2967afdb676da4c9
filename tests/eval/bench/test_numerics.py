"""``livetrans bench numerics`` on the shipped sample: every shape measured, numbers sane."""

from __future__ import annotations

import json

from eval.bench.numerics import MODES, main


def test_one_sentence_in_every_shape(tmp_path, capsys) -> None:
    out = tmp_path / "n"
    assert main(["--limit", "1", "--max-new", "6", "--out", str(out)]) == 0
    (result,) = json.loads((out / "numerics.json").read_text())
    assert result["sentences"] == 1 and result["reference_rows"] >= 1
    assert set(result["modes"]) == set(MODES)
    for stats in result["modes"].values():
        assert stats["rows"] == result["reference_rows"]
        assert 0 <= stats["delta_p50"] <= stats["delta_max"]
        assert 0 <= stats["gap_shift_max"] <= result["noise_max"] + 1e-6
        assert stats["diverged_sentences"] <= 1
    assert "gap shift" in (out / "numerics.md").read_text()
    assert "spread of a top-2 gap" in capsys.readouterr().out
