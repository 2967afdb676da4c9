"""Mistakes a user makes on the command line, reported as one line (exit code 2).

Every ``livetrans`` subcommand raises ``UsageError`` for what the user can fix (a bad
option value, a missing file or folder, an unreachable server, malformed input on stdin);
``app.cli.main`` prints it as one sentence on stderr and exits 2, never with a traceback.
A traceback is kept for bugs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from app.engine.cpu_threads import POLICIES
from app.translation.prompts import UnsupportedLanguageError, check_language

EXIT_USAGE = 2


class UsageError(Exception):
    """A user mistake: the message is one sentence saying what and where."""


def require_file(path: Path | str | None, what: str) -> Path:
    """``path`` as a ``Path`` if it names an existing file, else ``UsageError``."""
    return _require(path, what, Path.is_file, "file")


def _require(path: Path | str | None, what: str, exists, kind: str) -> Path:  # noqa: ANN001
    if path is None:
        raise UsageError(f"{what} is required")
    p = Path(path).expanduser()
    if not exists(p):
        if kind == "file" and p.is_dir():
            raise UsageError(f"{what}: {p} is a folder, not a file")
        raise UsageError(f"{what}: no such {kind}: {p}")
    return p


def _one_line_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    raise UsageError(f"{message} (see {self.prog} --help)")


@contextmanager
def one_line_argparse_errors() -> Iterator[None]:
    """While active, every ``ArgumentParser`` reports a bad option as ``UsageError``.

    argparse prints the whole usage block before its one-line error; the subcommands'
    parsers live in their own modules, so the CLI swaps the method for the run instead of
    asking each module to subclass.
    """
    original = argparse.ArgumentParser.error
    argparse.ArgumentParser.error = _one_line_error  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.error = original  # type: ignore[method-assign]


class PlainHelp(argparse.RawDescriptionHelpFormatter):
    """``--help`` that reads as plain text: docstring markup (````x````) dropped, paragraphs
    kept, and every option's default shown (an option without help gets one line saying
    its default)."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(text.replace("``", ""))

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and self._shows_default(action):
            action.help = "default: %(default)s"  # argparse skips options without help
        return super()._format_action(action)

    @staticmethod
    def _shows_default(action: argparse.Action) -> bool:
        # ``0`` is a default worth showing; ``None``, ``False`` and ``""`` say "not set"
        # (``0 in (None, False)`` is true in Python, hence the identity checks)
        default = action.default
        unset = default is None or default is False or default == "" or \
            default is argparse.SUPPRESS
        return not unset and bool(action.option_strings) and action.nargs != 0

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace("``", "")
        if not self._shows_default(action) or "%(default)" in text or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


def add_model_options(parser: argparse.ArgumentParser, threads: bool = True) -> None:
    """The options every model-loading subcommand shares, spelled as ``serve`` spells them:
    ``--model``, and (for commands that run the model) ``--n-threads`` (alias
    ``--threads``) and ``--omp-wait-policy`` (``app.cli`` applies it before llama.cpp
    loads)."""
    parser.add_argument("--model", default=None,
                        help="GGUF path (default: the bundled Gemma 3 270M)")
    if not threads:
        return
    parser.add_argument("--n-threads", "--threads", dest="n_threads", type=int, default=None,
                        help="CPU threads (default: all cores)")
    parser.add_argument("--omp-wait-policy", choices=POLICIES, default=None,
                        help="how idle CPU threads wait, as for serve (default: "
                             "$LIVETRANS_OMP_WAIT_POLICY, else auto)")


def omp_policy_in(argv: list[str]) -> str | None:
    """The ``--omp-wait-policy`` value in ``argv`` (it must act before llama.cpp loads,
    so the CLI reads it before the subcommand parses its options)."""
    for i, arg in enumerate(argv):
        if arg == "--omp-wait-policy" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--omp-wait-policy="):
            return arg.split("=", 1)[1]
    return None


def comma_list(item: Callable[[str], object] = str, what: str = "a value", *,
               choices: Iterable[str] | None = None, sep: str = ",") -> Callable[[str], str]:
    """An argparse ``type`` for a comma-separated option (``--ks 1,2,4``): every item must
    pass ``item`` (a conversion that raises ``ValueError``) and be one of ``choices``, else
    the option is refused in one line naming the item. The text is returned as given
    (blank items allowed), so the command splits it as before."""
    allowed = None if choices is None else tuple(choices)

    def check(text: str) -> str:
        for part in (p.strip() for p in text.split(sep)):
            if not part:
                continue
            if allowed is not None and part not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{part!r} is not one of {', '.join(allowed)}")
            try:
                item(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"{part!r} is not {what}") from None
        return text

    return check


def checked(convert: Callable[[str], object], what: str) -> Callable[[str], object]:
    """An argparse ``type`` for one value: ``convert`` (which raises ``ValueError`` on a
    bad value), refused in one line that says what was expected (``--limit 0``: "'0' is not
    a whole number >= 1") instead of argparse's "invalid positive_int value"."""

    def check(text: str) -> object:
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None

    return check


def positive_int(text: str) -> int:
    """``int`` that refuses 0 and negatives (ValueError)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def count(text: str) -> int:
    """``int`` that refuses negatives (ValueError)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def fraction(text: str) -> float:
    """A float in [0, 1) (ValueError otherwise): beta, a probability threshold."""
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(text)
    return value


def language(code: str) -> str:
    """An argparse ``type``: a supported language code, normalised (``DE`` -> ``de``); an
    unknown one is refused naming the supported ones."""
    try:
        return check_language(code, "lang")
    except UnsupportedLanguageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def language_and_path(spec: str) -> tuple[str, Path]:
    """An argparse ``type``: ``de=path/to/file`` -> (``de``, path), the language checked."""
    lang, sep, path = spec.partition("=")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"{spec!r} is not LANG=PATH (e.g. de=mono/de.txt)")
    return language(lang), Path(path)
