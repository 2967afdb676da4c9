"""Line-aligned parallel files: missing files and misaligned pairs are named errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.datasets.aligned import DatasetNotFoundError, aligned_pairs, read_segments


def test_read_segments_keeps_one_segment_a_line(tmp_path: Path) -> None:
    path = tmp_path / "de.txt"
    path.write_text("Eins.\nZwei.\n", encoding="utf-8")
    assert read_segments(path, "X", "hint") == ["Eins.", "Zwei."]


def test_a_missing_file_names_the_path_and_the_hint(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"X file not found: .*nope\.txt\. get it"):
        read_segments(tmp_path / "nope.txt", "X", "get it")


def test_misaligned_files_are_refused() -> None:
    assert aligned_pairs(["a"], ["b"], "X") == [("a", "b")]
    with pytest.raises(ValueError, match="X: 2 vs 1 lines"):
        aligned_pairs(["a", "b"], ["c"], "X")
