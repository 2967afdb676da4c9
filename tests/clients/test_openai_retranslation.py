"""The SDK example runs against the real server and prints one line per update."""

from __future__ import annotations

import json

from clients.openai_retranslation import main


def test_example_runs_a_session_over_http(live_server, data_dir, tmp_path, capsys) -> None:
    src = data_dir / "asr_partials" / "flores200_dev_en.jsonl"
    utterance = json.loads(src.read_text().splitlines()[1])
    utterance["events"] = utterance["events"][-4:]
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(utterance) + "\n")
    assert main(["--base-url", live_server.url + "/v1", "--file", str(path), "--limit", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("FINAL")


def test_example_takes_the_server_from_livetrans_server(live_server, monkeypatch,
                                                        capsys) -> None:
    """No ``--server``: ``LIVETRANS_SERVER`` names it, as for the other clients."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    monkeypatch.setenv("LIVETRANS_SERVER", live_server.url)
    assert main(["--file", str(sample), "--limit", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("FINAL") and len(lines) == 6  # the sample's six updates
