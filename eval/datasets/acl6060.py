"""ACL 60/60 as aligned text files: ``<root>/<split>/<lang>.txt`` (one segment a line)."""

from __future__ import annotations

from pathlib import Path

from eval.datasets.flores import DatasetNotFoundError

SOURCE_HINT = (
    "ACL 60/60 comes from the IWSLT 2023 release (ACL Anthology 2023.iwslt-1.2 dataset); "
    "pass the folder holding <split>/<lang>.txt with --acl-dir"
)


def read_acl(root: Path | None, split: str, lang: str) -> list[str]:
    if root is None:
        raise DatasetNotFoundError(f"no ACL 60/60 folder given. {SOURCE_HINT}")
    path = Path(root) / split / f"{lang}.txt"
    if not path.is_file():
        raise DatasetNotFoundError(f"ACL 60/60 file not found: {path}. {SOURCE_HINT}")
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def read_acl_pair(root: Path, split: str, src: str, tgt: str) -> list[tuple[str, str]]:
    sources, refs = read_acl(root, split, src), read_acl(root, split, tgt)
    if len(sources) != len(refs):
        raise ValueError(f"ACL 60/60 {src}/{tgt}: {len(sources)} vs {len(refs)} lines")
    return list(zip(sources, refs, strict=True))
