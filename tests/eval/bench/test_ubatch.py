"""``livetrans bench ubatch``: the grid it measures, its table, and a tiny real run."""

from __future__ import annotations

import pytest

from eval.bench.ubatch import Cell, main, spread, table


def test_rows_are_spread_as_evenly_as_whole_rows_allow() -> None:
    assert spread(8, 8) == [1] * 8
    assert spread(10, 4) == [3, 3, 2, 2]
    assert spread(3, 1) == [3]
    assert sum(spread(97, 8)) == 97


def test_the_table_gives_each_ubatch_and_the_ratio_to_the_first() -> None:
    text = table([Cell(8, 64, (5.2, 3.25))], [512, 48])
    assert "| ms/row at 512 | ms/row at 48 | 512 / 48 |" in text
    assert "| 8 | 64 | 5.20 | 3.25 | 1.60x |" in text


def test_prompt_rows_follow_as_columns_of_their_own() -> None:
    text = table([Cell(8, 32, (3.3, 3.2), (1.9, 1.8))], [512, 48])
    assert text.splitlines()[0].endswith(
        "| 512 / 48 | ms/prompt row at 512 | ms/prompt row at 48 |")
    assert "| 8 | 32 | 3.30 | 3.20 | 1.03x | 1.90 | 1.80 |" in text


@pytest.mark.parametrize("argv", [["--ubatches", "48"], ["--rows", "0"],
                                  ["--ubatches", "a,b"], ["--rows", "100000"],
                                  ["--sequences", "1000"], ["--cached", "99999999"]])
def test_bad_options_are_one_line_and_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()[-1]) > 0


def test_a_tiny_real_run_prints_every_shape(capsys) -> None:
    assert main(["--ubatches", "512,2", "--sequences", "1,2", "--rows", "1,4",
                 "--cached", "16", "--repeats", "1", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "x |" in line]
    # (1 sequence: 1 and 4 rows; 2 sequences: 4 rows; 1 row cannot spread over 2)
    assert [line.split(" | ")[:2] for line in rows] == [["| 1", "1"], ["| 1", "4"],
                                                          ["| 2", "4"]]


def test_a_tiny_run_with_prompt_rows_times_both_kinds_of_pass(capsys) -> None:
    assert main(["--ubatches", "512,4", "--sequences", "2", "--rows", "4",
                 "--cached", "16", "--repeats", "1", "--threads", "2",
                 "--prompt-rows"]) == 0
    out = capsys.readouterr().out
    assert "prompt rows: logits at each sequence's last row" in out
    line = next(x for x in out.splitlines() if x.startswith("| 2 | 4 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # 2 sequences, 4 rows: two ms/row, one ratio, two ms/prompt row, all positive
    assert len(cells) == 7 and all(float(c.rstrip("x")) > 0 for c in cells[2:])
