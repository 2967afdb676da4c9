"""Pathological finals in the report: counted by kind, listed by stream, never averaged."""

from __future__ import annotations

from eval.report import draft_totals, pathology_cell, pathology_counts, pathology_listing


def _stream(sid: str, final: dict, partials: int = 2) -> list[dict]:
    base = {"stream": sid, "source": "So here we", "lang": "zh", "finish": "stop"}
    recs = [{**base, "final": False, "text": "这里", "pathology": None,
             "draft_dropped": None} for _ in range(partials)]
    return recs + [{**base, "final": True, **final}]


def test_pathology_counts_and_listing() -> None:
    streams = [
        _stream("3", {"text": "So here we", "pathology": "copy", "retried": "copy",
                      "retry_ms": 120.0}),
        _stream("1", {"text": "谢谢大家今天听这个报告", "pathology": "prompt_example"}),
        _stream("2", {"text": "所以这里我们", "pathology": None}),
    ]
    counts = pathology_counts(streams)
    assert counts["pathological_finals"] == 2
    assert counts["pathological_by_kind"] == {"copy": ["3"], "prompt_example": ["1"]}
    assert counts["partials"] == 6 and counts["pathological_partials"] == 0
    assert counts["retried_finals"] == 1 and counts["retry_ms"] == 120.0
    row = {"dataset": "acl", "lang": "zh", "method": "ar", "streams": 3, "decode_s": 9.0,
           **counts}
    assert pathology_cell(row) == "2/3 (copy 1, prompt_example 1)"
    listing = pathology_listing({"acl|zh|ar": row})
    assert "copy in streams 3" in listing and "prompt_example in streams 1" in listing


def test_old_records_are_diagnosed_when_read() -> None:
    """Records written before the field existed are diagnosed from their text."""
    old = [{"stream": "0", "source": "So on the left hand side", "lang": "de",
            "finish": "stop", "final": True, "text": "So on the left hand side"}]
    assert pathology_counts([old])["pathological_by_kind"] == {"copy": ["0"]}


def test_draft_totals_sum_the_records_drafts_by_source() -> None:
    records = [
        {"drafts": {"proposed": {"ssbd": 5, "ngram": 2}, "accepted": {"ssbd": 4, "ngram": 0}}},
        {"drafts": {"proposed": {"ssbd": 3}, "accepted": {"ssbd": 3}}},
        {"drafted": 1},  # written before records carried drafts: counts nothing
        {"drafts": None},  # a server record from a server without the field
    ]
    assert draft_totals(records) == {"proposed": {"ssbd": 8, "ngram": 2},
                                     "accepted": {"ssbd": 7, "ngram": 0}}
