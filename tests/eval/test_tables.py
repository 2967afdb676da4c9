"""One report, two renderings: markdown for files and pipes, rich tables on a terminal."""

from __future__ import annotations

import io

import pytest

from eval.tables import Table, markdown, show


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _report() -> list:
    t = Table(["method", "chrF"], title="English→de [sic]")
    t.add("ar", "55.1")
    t.add("ssbd-b0.2", "[red]55.3")  # cells are text: no rich markup is interpreted
    return ["# eval", t, "Signatures: ..."]


def test_markdown_keeps_the_report_files_format() -> None:
    text = markdown(_report())
    assert text == ("# eval\n\n**English→de [sic]**\n\n| method | chrF |\n|---|---|\n"
                    "| ar | 55.1 |\n| ssbd-b0.2 | [red]55.3 |\nSignatures: ...")
    with pytest.raises(ValueError):
        Table(["a", "b"]).add("only one")


def test_show_draws_a_table_on_a_terminal_and_markdown_elsewhere() -> None:
    tty = _Terminal()
    show(_report(), tty)
    out = tty.getvalue()
    assert "┃" in out and "|---|" not in out and "[red]55.3" in out
    assert "English→de [sic]" in out and "# eval" in out
    pipe = io.StringIO()
    show(_report(), pipe)
    assert pipe.getvalue() == markdown(_report()) + "\n"
