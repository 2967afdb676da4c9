"""``livetrans caption`` against the real server: replay, stdin, statistics."""

from __future__ import annotations

import io
import json
import sys

from clients.caption import main


def test_replay_prints_stream_statistics(live_server, shared_data, capsys) -> None:
    path = shared_data / "asr_partials" / "acl6060_dev_en.jsonl"
    server = live_server.url  # the HTTP address, as users copy it
    assert main(["--server", server, "--file", str(path), "--limit", "2", "--fast", "--quiet",
                 "--json"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["finals"] == 2 and stats["errors"] == 0
    assert stats["captions"] >= 2 and stats["final_to_caption_ms_p50"] > 0
    assert stats["ne_display"] is not None


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
