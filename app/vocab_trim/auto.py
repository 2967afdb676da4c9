"""``serve --langs en,de``: the model trimmed to the event's languages, without asking.

Most users never run ``trim-vocab`` by hand, so a server told its languages builds the
trimmed copy itself on first start and reuses it afterwards. It needs no corpus: it counts
the ``wordfreq`` word lists of those languages (``app.vocab_trim.wordlists``) and the
server's own prompts (its few-shot examples and labels between every pair of the
languages); ``--corpus LANG=FILE`` adds the organiser's text. What is kept beyond that is
what ``trim-vocab`` keeps (``app.vocab_trim.selection``): the control and byte tokens, the
vocabulary's most frequent tokens in the languages' scripts, their single characters and
the pieces merging passes through.

The copy lives in the cache folder (``app.model_files.cache_dir``, ``trimmed/``), named by
the model's SHA-256, the language set, the corpora's SHA-256 and the version of this
recipe, so a changed model, language set, corpus or recipe gets a new copy and nothing
stale is served. It is written to a temporary file and renamed into place when complete
(``gguf_rewrite.write_trimmed``): a start that is killed half-way leaves no copy that a
later start would take for a finished one.

The server can always serve the full model, so nothing here stops it: a model whose
vocabulary cannot be trimmed (not a SentencePiece ``llama`` vocabulary) or a cache folder
that cannot be written is one warning, and the full model is served (still only for the
languages asked for). Mistakes the user can fix (an unknown or repeated language, a corpus
of another language) are refused before the server starts, by the settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.model_files import cache_dir
from app.vocab_trim.cli import DEFAULT_TOP, check_trimmed, load_trim_vocab
from app.vocab_trim.counting import count_lines, count_prompts
from app.vocab_trim.gguf_check import UnreadableGGUFError, string_key
from app.vocab_trim.gguf_rewrite import (
    LANGS_KEY,
    TrimError,
    open_gguf,
    special_token_ids,
    token_table,
    write_trimmed,
)
from app.vocab_trim.output import describe
from app.vocab_trim.scripts import scripts_of
from app.vocab_trim.selection import select_tokens
from app.vocab_trim.wordlists import DEFAULT_WORDS, WordListError, frequency_lines

log = logging.getLogger("livetrans.trim")

# What the automatic trim keeps changes with this number: a copy cached by an older recipe
# is not reused (its name has another key).
RECIPE_VERSION = 3  # 2: German words with ß (wordlists.word_forms); 3: neutral tokens
_CHECK_LINES = 300  # corpus lines re-tokenized with the written copy, per corpus


@dataclass(frozen=True)
class AutoTrim:
    """What ``serve`` asks for: the languages served, whether to trim, extra corpora."""

    langs: tuple[str, ...]
    corpora: tuple[tuple[str, Path], ...] = ()
    trim: bool = True
    words: int = DEFAULT_WORDS  # wordfreq words per language


@dataclass(frozen=True)
class ServedModel:
    """The file to load and the languages the server answers for (None: any)."""

    path: Path
    langs: frozenset[str] | None
    trimmed: bool = False


def served_model(model: Path, request: AutoTrim | None,
                 cache: Path | None = None) -> ServedModel:
    """The model ``serve`` loads for ``request`` (None: no ``--langs``, nothing changes):
    the cached trimmed copy, built now if missing, or the full model where it cannot be
    trimmed or cached (one warning) or ``--no-trim`` was given."""
    if request is None or not request.langs:
        return ServedModel(model, None)
    langs = frozenset(request.langs)
    shown = ",".join(request.langs)
    already = trimmed_for(model)
    if already is not None:
        missing = sorted(langs - already)
        if missing:
            raise TrimError(f"{model.name} was trimmed for {','.join(sorted(already))}, "
                            f"not for {','.join(missing)}: serve the full model with "
                            f"--langs {shown}")
        log.info("%s is already trimmed (for %s); serving %s", model.name,
                 ",".join(sorted(already)), shown)
        return ServedModel(model, langs)
    if not request.trim:
        log.info("serving %s for %s with its full vocabulary (--no-trim)", model.name, shown)
        return ServedModel(model, langs)
    folder = (cache or cache_dir()) / "trimmed"
    try:
        target = folder / copy_name(model, request)
    except OSError as exc:
        log.warning("cannot read %s to trim it (%s): serving the full model", model,
                    describe(exc))
        return ServedModel(model, langs)
    if target.is_file():
        log.info("serving %s: %s trimmed for %s (cached)", target.name, model.name, shown)
        return ServedModel(target, langs, trimmed=True)
    problem = unwritable(folder)
    if problem is not None:
        log.warning("cannot write the trimmed copy of %s to %s (%s): serving the full "
                    "model", model.name, folder, problem)
        return ServedModel(model, langs)
    try:
        build(model, request, target)
    except (TrimError, WordListError, OSError) as exc:
        reason = describe(exc) if isinstance(exc, OSError) else str(exc)
        log.warning("cannot trim %s for %s (%s): serving the full model", model.name, shown,
                    reason)
        return ServedModel(model, langs)
    return ServedModel(target, langs, trimmed=True)


def trimmed_for(model: Path) -> frozenset[str] | None:
    """The languages a file written by ``trim-vocab`` was trimmed for; None for a full
    model (or a file whose metadata cannot be read: llama.cpp then says why). Read from the
    header alone (``gguf_check.string_key``): every start with ``--langs`` asks, and
    ``GGUFReader`` took 15 s for the default model's vocabulary on 2 cores."""
    try:
        langs = string_key(model, LANGS_KEY)
    except (UnreadableGGUFError, OSError):
        return None
    if langs is None:
        return None
    return frozenset(x for x in langs.split(",") if x)


def copy_name(model: Path, request: AutoTrim) -> str:
    """``<model>.<langs>.<key>.gguf``: the key hashes everything the copy depends on."""
    recipe = {
        "model": file_sha256(model),
        "langs": sorted(request.langs),
        "corpora": sorted((lang, file_sha256(path)) for lang, path in request.corpora),
        "words": request.words, "top": DEFAULT_TOP, "wordfreq": _wordfreq_version(),
        "recipe": RECIPE_VERSION,
    }
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
    stem = model.name.removesuffix(".gguf")
    return f"{stem}.{'-'.join(sorted(request.langs))}.{key}.gguf"


def file_sha256(path: Path) -> str:
    """A file's SHA-256, read in 1 MiB blocks (a 250 MB model: a fraction of a second)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _wordfreq_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wordfreq")
    except PackageNotFoundError:  # pragma: no cover - a core dependency
        return "missing"


def unwritable(folder: Path) -> str | None:
    """Why no file can be created in ``folder`` (created if missing), or None: found by
    creating and removing one, as ``os.access`` says yes to root everywhere."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".probe.", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return describe(exc).lower()
    return None


class _Progress:
    """The build's progress as log lines: each step, numbered, with the time so far (a
    log line reaches a terminal, a container's log and a JSON log alike)."""

    def __init__(self, model: Path, steps: int) -> None:
        self.model, self.steps, self.done = model.name, steps, 0
        self.t0 = time.perf_counter()

    def step(self, what: str) -> None:
        self.done += 1
        log.info("trimming %s [%d/%d, %.0fs]: %s", self.model, self.done, self.steps,
                 time.perf_counter() - self.t0, what)


def build(model: Path, request: AutoTrim, out: Path) -> dict:
    """Count, select, write (atomically) and check the trimmed copy; a summary."""
    langs = list(request.langs)
    progress = _Progress(model, 4 + len(langs) + len(request.corpora))
    progress.step("reading the vocabulary")
    reader = open_gguf(model)
    table = token_table(reader)  # TrimError for a vocabulary that cannot be cut
    vocab = load_trim_vocab(model)
    try:
        if vocab.n_vocab != len(table):
            raise TrimError(f"llama.cpp reads {vocab.n_vocab} tokens but the metadata "
                            f"lists {len(table)}")
        counts = count_prompts(vocab, langs)
        for lang in langs:
            progress.step(f"counting the {request.words:,} commonest {lang} words (wordfreq)")
            counts += count_lines(vocab, frequency_lines(lang, request.words), lang)
        samples: list[tuple[str, str]] = []
        for lang, path in request.corpora:
            progress.step(f"counting --corpus {lang}={path}")
            lines = _read(path)
            counts += count_lines(vocab, lines, lang)
            samples += [(lang, line) for line in lines[:_CHECK_LINES]]
        progress.step("selecting the tokens to keep")
        selection = select_tokens(table, counts, scripts_of(langs), top=DEFAULT_TOP,
                                  always=special_token_ids(reader, len(table)),
                                  neutral=True)
        progress.step(f"writing {selection.size:,} of {len(table):,} tokens to {out}")
        write_trimmed(reader, selection.keep, out, sorted(langs), vocab.identity())
        progress.step("checking the new tokenizer")
        samples += _example_lines(langs)
        check = check_trimmed(vocab, out, selection.keep, samples)
    finally:
        vocab.close()
    if check["round_trip"] != check["lines"]:
        out.unlink(missing_ok=True)
        raise TrimError(f"the trimmed tokenizer changed {check['lines'] - check['round_trip']} "
                        f"of {check['lines']} lines")
    log.info("trimmed %s for %s: %d of %d tokens kept, %.0f MB, in %.0fs", model.name,
             ",".join(langs), selection.size, len(table), out.stat().st_size / 1e6,
             time.perf_counter() - progress.t0)
    return {"tokens": selection.size, "kept_by": dict(selection.kept_by), "check": check}


def _read(path: Path) -> list[str]:
    from drafters.build import read_lines

    try:
        return read_lines(path, None)
    except (OSError, UnicodeDecodeError) as exc:
        reason = describe(exc) if isinstance(exc, OSError) else "not UTF-8 text"
        raise TrimError(f"cannot read --corpus {path} ({reason})") from None


def _example_lines(langs: Sequence[str]) -> list[tuple[str, str]]:
    """The prompts' example sentences of ``langs``: text every copy must round-trip."""
    from app.translation.prompts import FEW_SHOT_EXAMPLES

    return [(lang, line) for lang in langs for line in FEW_SHOT_EXAMPLES[lang]]

