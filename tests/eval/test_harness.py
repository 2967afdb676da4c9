"""The harness on a tiny slice with the real model: files, tables, resume."""

from __future__ import annotations

from eval.harness import main


def _run(data_dir, out, *extra: str) -> int:
    return main(["--dataset", "flores", "--flores-dir", str(data_dir / "flores200"),
                 "--langs", "de", "--limit", "2", "--offset", "5", "--lag", "4",
                 "--betas", "0,0.2", "--mask-k", "3", "--out", str(out), *extra])


def test_tables_plots_and_resume(data_dir, tmp_path) -> None:
    full = tmp_path / "full"
    assert _run(data_dir, full) == 0
    for name in ("records.jsonl", "summary.json", "tables.md", "run.json"):
        assert (full / name).exists()
    assert (full / "plots" / "beta_flores_de.png").exists()
    tables = (full / "tables.md").read_text()
    assert "Table 3 layout" in tables and "COMET" in tables and "not computed" in tables

    # an interrupted run: keep only the first stream's records, then resume
    part = tmp_path / "part"
    part.mkdir()
    lines = (full / "records.jsonl").read_text().splitlines()
    first_stream = [ln for ln in lines if '"stream": "5"' in ln]
    (part / "records.jsonl").write_text("\n".join(first_stream) + "\n")
    assert _run(data_dir, part) == 0
    resumed = (part / "records.jsonl").read_text().splitlines()
    assert len(resumed) == len(lines)
    # same records -> same quality and flicker columns (timings differ run to run)
    import json

    a = json.loads((full / "summary.json").read_text())
    b = json.loads((part / "summary.json").read_text())
    assert a.keys() == b.keys()
    for key in a:  # every stream starts from an empty cache, so greedy results repeat
        for col in ("NE", "NE_display_k3", "A/D", "A/O", "chrF", "final_words", "updates"):
            assert a[key][col] == b[key][col], (key, col)


def test_report_only_recomputes_from_records(data_dir, tmp_path) -> None:
    out = tmp_path / "r"
    assert _run(data_dir, out, "--methods", "ar", "--betas", "") == 0
    before = (out / "summary.json").read_text()
    assert main(["--out", str(out), "--report-only", "--betas", "", "--mask-k", "3"]) == 0
    assert (out / "summary.json").read_text() == before


def test_models_are_compared_side_by_side(data_dir, tmp_path, trimmed_en_de) -> None:
    """Every method also runs on the compared model, as METHOD@NAME; the trimmed model's
    token ids are recorded in the base vocabulary, so display metrics are computed alike."""
    import json

    path, _ = trimmed_en_de
    out = tmp_path / "models"
    assert _run(data_dir, out, "--methods", "ar", "--betas", "0.2", "--display-modes", "",
                "--compare-model", f"trim={path}") == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["method"]: r for r in summary.values()}
    assert set(rows) == {"ar", "ssbd-b0.2", "ar@trim", "ssbd-b0.2@trim"}
    assert rows["ar@trim"]["model"] == "trim" and rows["ar@trim"]["speedup"] > 0
    assert rows["ssbd-b0.2@trim"]["NE_display_k3"] is not None
    assert (out / "plots" / "models.png").exists()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    # the two models' records of one stream are interleaved, stream by stream
    assert [r["stream"] for r in records] == sorted(r["stream"] for r in records)


def test_compare_model_mistakes_are_usage_errors(data_dir, tmp_path) -> None:
    import pytest

    from app.usage import UsageError, one_line_argparse_errors

    with one_line_argparse_errors():
        with pytest.raises(UsageError, match="NAME=PATH"):
            _run(data_dir, tmp_path / "a", "--compare-model", "no-path")
        with pytest.raises(UsageError, match="no such file"):
            _run(data_dir, tmp_path / "b", "--compare-model", f"x={tmp_path / 'none.gguf'}")
        with pytest.raises(UsageError, match="--server"):
            _run(data_dir, tmp_path / "c", "--server", "http://127.0.0.1:9",
                 "--compare-model", f"x={tmp_path}")
