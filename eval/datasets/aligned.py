"""Line-aligned parallel text files, the layout FLORES-200 and ACL 60/60 share."""

from __future__ import annotations

from pathlib import Path


class DatasetNotFoundError(FileNotFoundError):
    """A dataset file is missing; the message says where it was looked for."""


def read_segments(path: Path, dataset: str, hint: str) -> list[str]:
    """One segment a line; a missing file is ``DatasetNotFoundError`` naming the path."""
    if not path.is_file():
        raise DatasetNotFoundError(f"{dataset} file not found: {path}. {hint}")
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def aligned_pairs(sources: list[str], refs: list[str], what: str) -> list[tuple[str, str]]:
    """(source, reference) pairs; files of different lengths are not aligned: ``ValueError``."""
    if len(sources) != len(refs):
        raise ValueError(f"{what}: {len(sources)} vs {len(refs)} lines")
    return list(zip(sources, refs, strict=True))
