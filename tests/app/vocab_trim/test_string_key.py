"""``gguf_check.string_key``: one string key of a GGUF header, read without ``GGUFReader``
(``serve --langs`` asks every start whether its model is already trimmed)."""

from __future__ import annotations

import pytest

from app.model_files import resolve_model_path
from app.vocab_trim.gguf_check import UnreadableGGUFError, string_key
from app.vocab_trim.gguf_rewrite import LANGS_KEY
from tests.app.vocab_trim.ggufs import gguf_file, kv_str, kv_u32


def test_a_string_key_is_read_and_others_are_none(tmp_path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_file([kv_u32("general.alignment", 32), kv_str("general.name", "m"),
                                kv_str(LANGS_KEY, "de,en")], []))
    assert string_key(path, LANGS_KEY) == "de,en"
    assert string_key(path, "general.name") == "m"
    assert string_key(path, "general.alignment") is None  # not a string
    assert string_key(path, "no.such.key") is None


def test_a_damaged_header_is_refused(tmp_path) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(gguf_file([kv_str("general.name", "m" * 100)], [])[:60])
    with pytest.raises(UnreadableGGUFError):
        string_key(path, LANGS_KEY)


def test_the_default_model_is_no_trimmed_copy() -> None:
    path = resolve_model_path(None)
    assert string_key(path, LANGS_KEY) is None
    assert string_key(path, "general.architecture") == "gemma3"
