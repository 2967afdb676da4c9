"""The embedded PocketSphinx recogniser's text and its missing-package message (its speech
tests run through ``livetrans caption --asr pocketsphinx`` in tests/clients/test_audio.py)."""

from __future__ import annotations

import sys

import pytest

from app.speech.pocketsphinx import load_pocketsphinx, tidy
from app.usage import UsageError


def test_tidy_reads_as_a_caption() -> None:
    assert tidy("i think i'm here", final=False) == "I think I'm here"
    assert tidy("i think i'm here", final=True) == "I think I'm here."
    assert tidy("", final=True) == ""
    # a partial is a prefix of its final
    assert tidy("so we talk", final=True).startswith(tidy("so we talk", final=False))


def test_missing_pocketsphinx_is_one_line_with_the_fix(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pocketsphinx", None)  # import fails
    with pytest.raises(UsageError, match=r"pip install 'livetrans\[audio\]'"):
        load_pocketsphinx()
