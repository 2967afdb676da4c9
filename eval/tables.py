"""One report, two renderings: markdown for the report files, rich for a terminal.

The eval commands write markdown (``tables.md``, ``display.md``, ...) that reads well on a
code host but not as raw ``| a | b |`` in a terminal. A report is a list of blocks (text,
or a ``Table`` of already formatted cells); building both renderings from the same blocks
keeps them from drifting apart.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text


@dataclass
class Table:
    """Headers and rows of text cells; ``title`` goes above the table (bold in markdown,
    the rich table's title in a terminal)."""

    headers: Sequence[str]
    rows: list[list[str]] = field(default_factory=list)
    title: str = ""

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{len(cells)} cells for {len(self.headers)} columns")
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        """GitHub markdown, one line per row, the title (when set) above it."""
        lines = [f"\n**{self.title}**\n"] if self.title else []
        lines += ["| " + " | ".join(self.headers) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)

    def rich(self) -> RichTable:
        table = RichTable(title=Text(self.title) if self.title else None, title_justify="left")
        for h in self.headers:
            table.add_column(h, overflow="fold")  # a narrow terminal folds, never crops
        for row in self.rows:
            table.add_row(*(Text(c) for c in row))  # cells are text, never rich markup
        return table


Block = str | Table


def markdown(blocks: Sequence[Block]) -> str:
    """The report as markdown: text blocks as they are, tables rendered."""
    return "\n".join(b.markdown() if isinstance(b, Table) else b for b in blocks)


def show(blocks: Sequence[Block], file: TextIO | None = None) -> None:
    """Print the report: rich tables on a terminal; the markdown elsewhere (a pipe, a log
    file), so redirected output is the same text the report files hold."""
    out = file or sys.stdout
    if not out.isatty():
        print(markdown(blocks), file=out)
        return
    console = Console(file=out, soft_wrap=False)
    for b in blocks:
        console.print(b.rich() if isinstance(b, Table) else Text(b))
