"""The documentation a newcomer reads: a short README, and the site built from docs/.

The site (``mkdocs.yml``, MkDocs with the Material theme) builds with ``--strict``, which
with the ``validation`` settings of ``mkdocs.yml`` turns a link to a page that does not
exist, an anchor that no page has and a page left out of the nav into errors. The README is
not part of the site, so its links are checked here, and so are the docs pages' links by
file (which also holds for readers on GitHub), and the source files the pages name as code
must exist (a file moved without its docs fails here). ``API.md`` at the repository root is
the API contract; ``docs/api.md`` is the same text, for the site.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README_MAX_LINES = 200

# [text](target) and ![alt](target), outside code; a target may carry a "title"
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _mkdocs() -> list[str]:
    exe = Path(sys.executable).with_name("mkdocs")
    if exe.exists():
        return [str(exe)]
    if shutil.which("mkdocs"):
        return ["mkdocs"]
    pytest.skip("mkdocs is not installed (it comes with the dev extra: pip install -e '.[dev]')")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    environ = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner, not a warning
    return subprocess.run([*_mkdocs(), "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True,
                          timeout=300, env=environ)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("material", reason="mkdocs-material is not installed (dev extra)")
    done = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "architecture" / "index.html").exists()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build is what catches broken links: one bad link, one bad anchor."""
    pytest.importorskip("material", reason="mkdocs-material is not installed (dev extra)")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8")
                     + "\n[gone](no-such-page.md) [nowhere](live.md#no-such-anchor)\n",
                     encoding="utf-8")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr and "no-such-anchor" in done.stderr


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def _links(text: str) -> list[str]:
    """The link targets of a Markdown text, outside fenced blocks and code spans."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def test_the_link_reader() -> None:
    text = ("[a](a.md) ![b](img/b.png \"title\") [c](https://x.example) `[d](d.md)`\n"
            "```\n[e](e.md)\n```\n[f](f.md#part)\n")
    assert _links(text) == ["a.md", "img/b.png", "https://x.example", "f.md#part"]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_point_at_files_that_exist(page: Path) -> None:
    broken = []
    for target in _links(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, a mail address, an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: links to missing files: {broken}"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_source_files_named_in_the_pages_exist(page: Path) -> None:
    """Source files are named as code (`app/live/pipeline.py`), not linked: a file that
    moved or went away leaves its old name here, which this catches."""
    named = re.findall(r"`((?:app|drafters|eval|clients|tests|docker)/[\w./-]*)`",
                       page.read_text(encoding="utf-8"))
    gone = sorted({n for n in named if not (REPO / n.rstrip("/")).exists()})
    assert not gone, f"{page.relative_to(REPO)} names files that do not exist: {gone}"


def test_the_readme_is_short_and_links_every_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = readme.count("\n") + (not readme.endswith("\n"))
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"
    linked = {Path(t.split("#")[0]).name for t in _links(readme) if t.startswith("docs/")}
    # every page but docs/api.md, for which the README links API.md itself
    missing = sorted(p.name for p in DOCS.glob("*.md") if p.name not in linked | {"api.md"})
    assert not missing, f"README.md links no docs page for: {missing}"
    assert "](API.md" in readme


def test_the_readme_keeps_the_two_commands_and_the_sdk_example() -> None:
    """The Quick start page holds the README's code blocks as they are."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quickstart = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```(?:bash|python)\n.*?^```$", readme, flags=re.M | re.S)
    kept = [b for b in blocks if b.startswith("```bash\nmake serve ")
            or "from openai import OpenAI" in b]
    assert len(kept) == 2 and "\nmake test " in kept[0], kept
    for block in kept:
        assert block in quickstart, block[:120]


def test_docs_api_is_the_api_contract() -> None:
    assert (DOCS / "api.md").read_text(encoding="utf-8") == \
        (REPO / "API.md").read_text(encoding="utf-8"), \
        "docs/api.md differs from API.md: after editing API.md, cp API.md docs/api.md"


def test_every_page_is_in_the_nav() -> None:
    """Also checked by the strict build (``omitted_files``); this says which page."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r":\s*([\w./-]+\.md)\s*$", config, flags=re.M))
    assert nav == {p.name for p in DOCS.glob("*.md")}
