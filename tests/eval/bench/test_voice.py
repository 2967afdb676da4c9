"""``livetrans bench voice``: every installed engine's phrases timed, RTF per engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.voice import espeak
from eval.bench.voice import main


@pytest.mark.skipif(espeak.binary() is None, reason="espeak-ng is not installed")
def test_prints_and_writes_the_rtf_of_each_engine(tmp_path: Path, capsys) -> None:
    out = tmp_path / "vb.json"
    assert main(["--repeats", "1", "--engines", "espeak-ng,piper", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {("espeak-ng", "en"), ("espeak-ng", "ja")} <= {(r["engine"], r["lang"])
                                                           for r in rows}
    for row in rows:
        assert row["phrases"] == 4 and row["audio_s"] > 4 and row["rtf"] > 0
    table = capsys.readouterr().out
    assert table.startswith("| engine | voice | lang |") and "espeak-ng" in table


def test_an_unknown_engine_is_refused(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--engines", "festival"])
    assert exit_.value.code == 2 and "festival" in capsys.readouterr().err
