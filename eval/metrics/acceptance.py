"""Draft acceptance: A/D = accepted / drafted tokens, A/O = accepted / output tokens."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def acceptance(records: Iterable[Mapping]) -> dict[str, float | None]:
    drafted = accepted = output = 0
    for r in records:
        drafted += r["drafted"]
        accepted += r["accepted"]
        output += r["tokens"]
    return {
        "A/D": accepted / drafted if drafted else None,
        "A/O": accepted / output if output else None,
    }
