"""Draft acceptance: A/D = accepted / drafted tokens, A/O = accepted / output tokens, over
eval records (the rates themselves: ``app.engine.draft_stats.acceptance``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.engine.draft_stats import acceptance as rates


def acceptance(records: Iterable[Mapping]) -> dict[str, float | None]:
    drafted = accepted = output = 0
    for r in records:
        drafted += r["drafted"]
        accepted += r["accepted"]
        output += r["tokens"]
    return rates(drafted, accepted, output)
