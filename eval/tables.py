"""One report, two renderings: markdown for the report files, rich for a terminal.

The eval commands write markdown (``tables.md``, ``display.md``, ...) that reads well on a
code host but not as raw ``| a | b |`` in a terminal. A report is a list of blocks (text,
or a ``Table`` of already formatted cells); building both renderings from the same blocks
keeps them from drifting apart.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

MAX_UNBROKEN = 18  # widest word kept on one line in a terminal table ("ssbd-b0.2+agreed")
LABEL_COLUMNS = 2  # the leading columns that name a row (dataset, method)


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

    def rich(self, width: int | None = None) -> RichTable:
        """The rich table for a terminal ``width`` columns wide (None: any width).

        Words stay whole (``ssbd-b0.2+agreed`` is not split). A table too wide for that is
        shown turned: one column per row, one line per header, as a terminal reads a wide
        record best; if even that does not fit, the original folds its cells.
        """
        if width is None or self._min_width() <= width:
            return self._rich(keep_words=True)
        turned = self.turned()
        if turned._min_width() <= width:
            return turned._rich(keep_words=True)
        return self._rich(keep_words=False)

    def turned(self) -> Table:
        """Rows become columns, named by their label cells; headers become the first column."""
        n = min(LABEL_COLUMNS, len(self.headers) - 1)
        names = [" ".join(row[:n]) for row in self.rows]
        table = Table([" / ".join(self.headers[:n]), *names], title=self.title)
        for i, header in enumerate(self.headers[n:], start=n):
            table.add(header, *(row[i] for row in self.rows))
        return table

    def _word_widths(self) -> list[int]:
        """Each column's longest word (header included), up to ``MAX_UNBROKEN``."""
        widths = []
        for i, h in enumerate(self.headers):
            words = [w for cell in [h, *(row[i] for row in self.rows)] for w in cell.split()]
            widths.append(min(max((len(w) for w in words), default=1), MAX_UNBROKEN))
        return widths

    def _min_width(self) -> int:
        """Terminal columns needed with every word whole (rich pads each column by 2 and
        the table's edges by 1)."""
        return sum(self._word_widths()) + 2 * len(self.headers) + 2

    def _rich(self, keep_words: bool) -> RichTable:
        # light rules: a terminal table is mostly its cells
        table = RichTable(title=Text(self.title) if self.title else None, title_justify="left",
                          box=box.SIMPLE_HEAD)
        for h, longest in zip(self.headers, self._word_widths(), strict=True):
            table.add_column(h, overflow="fold", min_width=longest if keep_words else None)
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
        console.print(b.rich(console.width) if isinstance(b, Table) else Text(b))


def write_results(out: Path, stem: str, summaries: list[dict], table: Table) -> list[Path]:
    """A bench's results as ``<stem>.json`` (one summary per run) and ``<stem>.md`` (its
    table), in ``out`` (made if missing); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    data, text = out / f"{stem}.json", out / f"{stem}.md"
    data.write_text(json.dumps(summaries, indent=1) + "\n")
    text.write_text(table.markdown() + "\n")
    return [data, text]
