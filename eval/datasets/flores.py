"""FLORES-200 in its official layout: ``<root>/<split>/<code>.<split>``, one sentence a line.

Users point ``--flores-dir`` at the full dataset (the devtest split included); codes are
FLORES codes (``eng_Latn``) or ISO 639-1 codes for the languages this project knows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.translation.prompts import UnsupportedLanguageError, check_language
from eval.datasets.aligned import DatasetNotFoundError, aligned_pairs, read_segments

ISO_TO_FLORES = {
    "en": "eng_Latn", "de": "deu_Latn", "zh": "zho_Hans", "ja": "jpn_Jpan", "uk": "ukr_Cyrl",
    "fr": "fra_Latn", "es": "spa_Latn", "it": "ita_Latn", "pt": "por_Latn", "ru": "rus_Cyrl",
    "crh": "crh_Latn",
}
SOURCE_HINT = (
    "FLORES-200 comes from the facebookresearch/flores repository (flores200_dataset.tar.gz); "
    "pass the folder that holds dev/ and devtest/ with --flores-dir"
)


def flores_code(lang: str) -> str:
    return ISO_TO_FLORES.get(lang, lang)


def iso_code(lang: str) -> str:
    """``deu_Latn`` -> ``de`` (a FLORES code given where an ISO 639-1 one is meant)."""
    return next((iso for iso, code in ISO_TO_FLORES.items() if code == lang), lang)


def language_arg(code: str) -> str:
    """argparse type: a language the prompts support, as its ISO 639-1 code (FLORES codes
    accepted), so ``--langs xx`` says "unsupported language", not "file missing"."""
    try:
        return check_language(iso_code(code.strip()), "lang")
    except UnsupportedLanguageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def language_list(text: str) -> list[str]:
    """argparse type: comma-separated languages (``de,zh``), each checked by ``language_arg``."""
    langs = [language_arg(part) for part in text.split(",") if part.strip()]
    if not langs:
        raise argparse.ArgumentTypeError("name at least one language")
    return langs


def flores_path(root: Path | None, split: str, lang: str) -> Path:
    if root is None:
        raise DatasetNotFoundError(f"no FLORES-200 folder given. {SOURCE_HINT}")
    return Path(root) / split / f"{flores_code(lang)}.{split}"


def read_flores(root: Path, split: str, lang: str) -> list[str]:
    return read_segments(flores_path(root, split, lang), "FLORES", SOURCE_HINT)


def read_flores_pair(root: Path, split: str, src: str, tgt: str) -> list[tuple[str, str]]:
    """Aligned (source, reference) sentence pairs."""
    return aligned_pairs(read_flores(root, split, src), read_flores(root, split, tgt),
                         f"FLORES {src}/{tgt} {split}")


def add_flores_options(parser: argparse.ArgumentParser, *, langs: str,
                       limit: int | None) -> None:
    """``--flores-dir`` (required), ``--split``, ``--langs`` and ``--limit``, spelled and
    explained alike in every command that reads FLORES."""
    parser.add_argument("--flores-dir", type=Path, required=True,
                        help="FLORES-200 folder holding dev/ and devtest/ "
                             "(see README 'Evaluation data')")
    parser.add_argument("--split", default="dev", help="FLORES split: dev or devtest")
    parser.add_argument("--langs", default=langs.split(","),
                        type=language_list,
                        help="comma-separated target languages (ISO 639-1 or FLORES codes)")
    parser.add_argument("--limit", type=int, default=limit,
                        help="sentences per language (default: all)" if limit is None
                        else "sentences per language")
