"""ACL 60/60 as aligned text files: ``<root>/<split>/<lang>.txt`` (one segment a line)."""

from __future__ import annotations

from pathlib import Path

from eval.datasets.aligned import DatasetNotFoundError, aligned_pairs, read_segments

SOURCE_HINT = (
    "ACL 60/60 comes from the IWSLT 2023 release (ACL Anthology 2023.iwslt-1.2 dataset); "
    "pass the folder holding <split>/<lang>.txt with --acl-dir"
)


def read_acl(root: Path | None, split: str, lang: str) -> list[str]:
    if root is None:
        raise DatasetNotFoundError(f"no ACL 60/60 folder given. {SOURCE_HINT}")
    return read_segments(Path(root) / split / f"{lang}.txt", "ACL 60/60", SOURCE_HINT)


def read_talk_ids(root: Path | None, split: str) -> list[str] | None:
    """The talk of each segment (``<split>/talk_ids.txt``, one id a line), or None when
    the folder has no such file."""
    if root is None or not (Path(root) / split / "talk_ids.txt").is_file():
        return None
    return read_segments(Path(root) / split / "talk_ids.txt", "ACL 60/60", SOURCE_HINT)


def read_acl_pair(root: Path, split: str, src: str, tgt: str) -> list[tuple[str, str]]:
    return aligned_pairs(read_acl(root, split, src), read_acl(root, split, tgt),
                         f"ACL 60/60 {src}/{tgt}")
