"""What ``docker build`` sends: the repository filtered by ``.dockerignore``, computed here
with Docker's own matching rules (moby's patternmatcher) so that no daemon is needed."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 5 * 1024 * 1024


def _clean(pattern: str) -> str:
    """Go's ``filepath.Clean`` as Docker applies it, and the leading ``/`` dropped."""
    parts: list[str] = []
    for part in pattern.strip().split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts) or "."


@cache
def _regex(pattern: str) -> re.Pattern:
    """moby patternmatcher: ``**`` any number of directories, ``*`` and ``?`` within one
    path element, ``[...]`` character classes."""
    out, i = "^", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # "**/" also matches no directory at all
                out += "(?:.*/)?"
                i += 1
            else:
                out += ".*"
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.index("]", i)
            out += "[" + pattern[i + 1:end].replace("\\", "\\\\") + "]"
            i = end
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + "$")


def dockerignore_rules(text: str) -> list[tuple[bool, str]]:
    """``(is_exception, cleaned pattern)`` per rule, in order."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, _clean(line[1:] if negate else line)))
    return rules


def excluded(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Docker's ``MatchesOrParentMatches``: the last rule matching the path or one of its
    parent directories decides."""
    parents = path.split("/")[:-1]
    candidates = [path] + ["/".join(parents[: i + 1]) for i in range(len(parents))]
    result = False
    for negate, pattern in rules:
        if negate != result:  # only a rule that could change the outcome is looked at
            continue
        if any(_regex(pattern).match(c) for c in candidates):
            result = not negate
    return result


def build_context(root: Path = REPO) -> dict[str, int]:
    """``{relative path: size}`` of every file the build context holds."""
    rules = dockerignore_rules((root / ".dockerignore").read_text())
    exceptions = [p for negate, p in rules if negate]
    files: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in dirnames:
            path = rel_dir + d
            # an excluded folder is skipped unless an exception could reach inside it
            if excluded(path, rules) and not any(
                    e.startswith(path + "/") or e.startswith("**") for e in exceptions):
                continue
            keep.append(d)
        dirnames[:] = keep
        for f in filenames:
            path = rel_dir + f
            if not excluded(path, rules):
                files[path] = os.path.getsize(os.path.join(dirpath, f))
    return files


@pytest.fixture(scope="module")
def context() -> dict[str, int]:
    return build_context()


def test_matcher_follows_dockers_rules() -> None:
    rules = dockerignore_rules("*\n!app/\napp/**/*.pyc\n!docker/x.py\n/results\n")
    assert not excluded("app/cli.py", rules) and not excluded("app/static/live.html", rules)
    assert excluded("app/engine/__pycache__/a.pyc", rules)
    assert excluded(".venv/bin/python", rules) and excluded("Makefile", rules)
    assert not excluded("docker/x.py", rules) and excluded("docker/Dockerfile", rules)
    assert excluded("results/a/b.json", dockerignore_rules("/results"))
    assert excluded("x/__pycache__/y.pyc", dockerignore_rules("**/__pycache__/"))
    assert excluded("__pycache__/y.pyc", dockerignore_rules("**/__pycache__/"))


def test_the_context_is_small(context: dict[str, int]) -> None:
    total = sum(context.values())
    biggest = sorted(context.items(), key=lambda kv: -kv[1])[:5]
    assert total < LIMIT_BYTES, f"{total} bytes; biggest: {biggest}"


@pytest.mark.parametrize("prefix", [
    ".venv/", ".git/", "results/", "reports/", "shared/", "tests/", ".hypothesis/",
    ".pytest_cache/", ".ruff_cache/", ".benchmarks/", "livetrans.egg-info/", "build/",
])
def test_the_context_leaves_out(context: dict[str, int], prefix: str) -> None:
    assert not [p for p in context if p.startswith(prefix)]


def test_the_context_has_no_bytecode(context: dict[str, int]) -> None:
    assert not [p for p in context if "__pycache__/" in p or p.endswith((".pyc", ".pyo"))]


def test_the_context_holds_what_the_images_install(context: dict[str, int]) -> None:
    for path in ("pyproject.toml", "README.md", "docker/requirements.py", "app/cli.py",
                 "app/static/live.html", "drafters/chain.py", "clients/caption.py",
                 "eval/harness.py"):
        assert path in context, path
    # every package setuptools is told to find is there, with its __init__.py
    for package in ("app", "drafters", "clients", "eval"):
        assert f"{package}/__init__.py" in context
    # every tracked source file of those packages is sent
    tracked = {p for p in context if p.endswith(".py")}
    for package in ("app", "drafters", "clients", "eval"):
        for path in (REPO / package).rglob("*.py"):
            rel = path.relative_to(REPO).as_posix()
            if "/reports/" not in rel and "__pycache__" not in rel:
                assert rel in tracked, rel
