"""Where ``trim-vocab`` writes: refused in one line before any work, written atomically.

Counting and selecting take seconds to minutes, so an output path that cannot be written
(its folder is a file, is not writable, it names a folder, a FIFO or a device, it is one of
the inputs) is refused before they start rather than after, with nothing written. The path
is followed through symbolic links: what is checked is what is written (a link to a FIFO is
refused like the FIFO; a link to a regular file gets the new file at its target).

Writing goes to a temporary file beside the target, renamed into place only when complete;
missing folders above it are created then, and removed again if the write fails.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from app.usage import UsageError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def not_a_regular_file(path: Path) -> str | None:
    """What ``path`` is ("a folder", "a named pipe (FIFO)", ...) when it exists and is not a
    regular file; None for a regular file or nothing at all."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # nothing there, or the folder checks say what is wrong with the path
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def check_output_path(path: Path, option: str, inputs: Mapping[str, Path]) -> Path:
    """The real path to write ``path`` to (symbolic links followed), or ``UsageError`` in
    one line naming ``option`` when it cannot be written there. ``inputs`` maps what each
    input is (e.g. "the model being trimmed") to its path: none may be overwritten."""
    target = Path(os.path.realpath(path.expanduser()))
    for what, source in inputs.items():
        if _same_file(target, source):
            raise UsageError(f"{option} {path} is {what}; name a new file")
    kind = not_a_regular_file(target)
    if kind == "a folder":
        raise UsageError(f"{option} {path} is a folder; name the file to write")
    if kind is not None:
        raise UsageError(f"{option} {path} is {kind}, not a regular file; name a file to "
                         "write")
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {path} is read-only; remove it or name another file")
    _check_folder(target, path, option)
    return target


def _same_file(target: Path, source: Path) -> bool:
    if target == Path(os.path.realpath(source)):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(target, source)  # a hard link
    return False


def _check_folder(target: Path, path: Path, option: str) -> None:
    """The nearest existing folder above ``target`` is a folder we may create files in
    (folders missing below it are created when writing)."""
    for folder in target.parents:
        if not os.path.lexists(folder):
            continue
        if not os.path.isdir(folder):
            raise UsageError(f"{option} {path}: {folder} is a file, not a folder")
        reason = None
        if not os.access(folder, os.W_OK | os.X_OK):
            reason = ("the file system is read-only" if _read_only_fs(folder)
                      else "permission denied")
        elif folder == target.parent:
            reason = _probe(folder)
        if reason is not None:
            raise UsageError(f"{option} {path}: cannot create files in {folder} ({reason})")
        return


def _probe(folder: Path) -> str | None:
    """Why a file cannot be created in ``folder``, found by creating (and removing) an
    empty one: ``os.access`` says yes to root everywhere, even in ``/proc``."""
    try:
        fd, name = tempfile.mkstemp(prefix=".trim-vocab.", suffix=".probe", dir=folder)
    except OSError as exc:
        return describe(exc).lower()
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None


def _read_only_fs(folder: Path) -> bool:
    with contextlib.suppress(OSError):
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    return False


@contextlib.contextmanager
def atomic_output(target: Path, on_error: Callable[[OSError], Exception]) -> Iterator[Path]:
    """A temporary path beside ``target`` to write; renamed to ``target`` when the block
    ends normally. On any failure the temporary file and the folders made for it are
    removed, and an ``OSError`` becomes ``on_error(exc)`` (one line for the user)."""
    made: list[Path] = []
    tmp: Path | None = None
    try:
        _make_folders(target.parent, made)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part",
                                    dir=target.parent)
        os.close(fd)
        tmp = Path(name)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would make a private model
        yield tmp
        kind = not_a_regular_file(target)  # it may have changed since the check
        if kind is not None:
            raise OSError(errno.EEXIST, f"{target} is now {kind}")
        os.replace(tmp, target)
    except BaseException as exc:
        _remove(tmp, made)
        if isinstance(exc, OSError):
            raise on_error(exc) from None
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _make_folders(folder: Path, made: list[Path]) -> None:
    """Create ``folder`` and any missing folders above it, outermost first, each appended
    to ``made`` as soon as it exists (a failure half-way still removes them)."""
    for f in reversed((folder, *folder.parents)):
        if not os.path.lexists(f):
            f.mkdir()
            made.append(f)


def _remove(tmp: Path | None, made: list[Path]) -> None:
    if tmp is not None:
        with contextlib.suppress(OSError):
            tmp.unlink()
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def describe(exc: OSError) -> str:
    """An ``OSError`` in a few words (its strerror, else its text)."""
    return exc.strerror or str(exc) or type(exc).__name__
