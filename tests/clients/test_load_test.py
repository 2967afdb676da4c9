"""The load-test script: its update schedule, and a small real run against the server."""

from __future__ import annotations

import argparse
import asyncio

from clients.load_test import build_updates, run

UTTS = [
    {"events": [{"t": 0.5, "type": "partial", "text": "a"},
                {"t": 1.0, "type": "final", "text": "a b"}]},
    {"events": [{"t": 0.4, "type": "partial", "text": "c"},
                {"t": 0.8, "type": "partial", "text": "c d"},
                {"t": 1.2, "type": "final", "text": "c d e"}]},
]


def test_schedule_has_n_updates_and_every_segment_ends_final() -> None:
    ups = build_updates(UTTS, 6, offset=0)
    assert len(ups) == 6
    times = [t for t, _ in ups]
    assert times == sorted(times)
    by_seg: dict[int, list[str]] = {}
    for _, msg in ups:
        by_seg.setdefault(msg["segment"], []).append(msg["type"])
    assert all(types[-1] == "final" and types.count("final") == 1
               for types in by_seg.values())


def test_small_real_load_loses_no_final(live_server, data_dir) -> None:
    args = argparse.Namespace(
        server=live_server.url, asr_file=data_dir / "asr_partials" / "acl6060_dev_en.jsonl",
        sessions=4, updates=12, http_clients=1, speed=20.0, target_lang="de", max_seconds=300)
    stats = asyncio.run(run(args))
    assert stats.finals_sent > 0 and stats.finals_captioned == stats.finals_sent
    assert stats.out_of_order == 0
    assert not any(code >= 500 for code in stats.http_status)
