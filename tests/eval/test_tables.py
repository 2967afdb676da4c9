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
    assert "─" in out and "|---|" not in out and "[red]55.3" in out
    assert "English→de [sic]" in out and "# eval" in out
    pipe = io.StringIO()
    show(_report(), pipe)
    assert pipe.getvalue() == markdown(_report()) + "\n"


def _wide() -> Table:
    headers = ["Dataset", "Method", *(f"metric number {i}" for i in range(12))]
    t = Table(headers, title="English→ja")
    for method in ("ar", "ssbd-b0.2+agreed"):
        t.add("flores", method, *(f"{i}.25" for i in range(12)))
    return t


def _rendered(table: Table, width: int) -> list[str]:
    from rich.console import Console

    console = Console(width=width, file=io.StringIO())
    console.print(table.rich(width))
    return console.file.getvalue().splitlines()


def test_a_table_too_wide_for_the_terminal_is_turned_not_cropped() -> None:
    lines = _rendered(_wide(), 80)
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    # one column per row, named by its label cells; every header and cell still shown
    assert "flores ssbd-b0.2+agreed" in text and "Dataset / Method" in text
    assert all(f"metric number {i}" in text for i in range(12))
    assert text.count("11.25") == 2


def test_a_table_that_fits_keeps_its_words_whole() -> None:
    text = "\n".join(_rendered(_wide(), 400))
    assert "ssbd-b0.2+agreed" in text and "Dataset / Method" not in text
    narrow = Table(["method", "chrF"])
    narrow.add("ssbd-b0.2+agreed", "55.3")
    assert any("ssbd-b0.2+agreed" in line for line in _rendered(narrow, 30))


def test_write_results_writes_the_summaries_and_the_table(tmp_path) -> None:
    import json

    from eval.tables import write_results

    t = Table(["method", "chrF"])
    t.add("ar", "55.1")
    paths = write_results(tmp_path / "new", "bench", [{"method": "ar", "chrf": 55.1}], t)
    assert [p.name for p in paths] == ["bench.json", "bench.md"]
    assert json.loads(paths[0].read_text()) == [{"method": "ar", "chrf": 55.1}]
    assert paths[1].read_text() == t.markdown() + "\n"
