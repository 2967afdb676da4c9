"""``livetrans caption`` against the real server: replay, stdin, statistics."""

from __future__ import annotations

import io
import json
import sys

from clients.caption import RunStats, main


def test_replay_prints_stream_statistics(live_server, shared_data, capsys) -> None:
    path = shared_data / "asr_partials" / "acl6060_dev_en.jsonl"
    server = live_server.url  # the HTTP address, as users copy it
    assert main(["--server", server, "--file", str(path), "--limit", "2", "--fast", "--quiet",
                 "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 2 and stats["errors"] == 0
    assert stats["captions"] >= 2 and stats["final_to_caption_ms_p50"] > 0
    assert stats["ne_display"] is not None
    assert "/" in stats["drafts_accepted"]  # accepted/proposed by source, e.g. "ngram 29/49"


def test_partials_from_stdin(live_server, monkeypatch, capsys) -> None:
    lines = [{"type": "partial", "text": "Thank you"},
             {"type": "final", "text": "Thank you all."},
             {"type": "final", "text": "Next slide please."}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(x) + "\n" for x in lines)))
    server = live_server.url  # the HTTP address, as users copy it
    assert main(["--server", server, "--stdin", "--quiet", "--json",
                 "--target-lang", "ja"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 2


def test_draft_counts_by_source_add_up_over_captions() -> None:
    stats = RunStats()
    stats.count_drafts({"drafts": {"proposed": {"ssbd": 5, "ngram": 2},
                                   "accepted": {"ssbd": 4, "ngram": 0}}})
    stats.count_drafts({"drafts": {"proposed": {"ssbd": 3}, "accepted": {"ssbd": 3}}})
    stats.count_drafts({"draft_tokens": 1})  # a server without the field: nothing counted
    assert stats.summary("word")["drafts_accepted"] == "ngram 0/2, ssbd 7/8"
    assert RunStats().summary("word")["drafts_accepted"] == "0"


def test_the_tracked_sample_replays_without_any_data_beside_the_repo(live_server, capsys,
                                                                     monkeypatch) -> None:
    """The README's first caption command: the sample in eval/samples, the server from
    ``LIVETRANS_SERVER``."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "eval" / "samples" / "asr_sample_en.jsonl"
    monkeypatch.setenv("LIVETRANS_SERVER", live_server.url)
    assert main(["--file", str(sample), "--fast", "--quiet", "--json",
                 "--target-lang", "de"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 3 and stats["errors"] == 0
