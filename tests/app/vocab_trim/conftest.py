"""The full tokenizer, shared by the tests here (the trimmed model: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def vocab():
    """The bundled model's full tokenizer (no weights)."""
    from app.loader import load_vocab

    v = load_vocab()
    yield v
    v.close()
