"""One model trimmed to en,de from the repository's samples, shared by the tests here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[3] / "eval" / "samples"


@pytest.fixture(scope="session")
def vocab():
    """The bundled model's full tokenizer (no weights)."""
    from app.loader import load_vocab

    v = load_vocab()
    yield v
    v.close()


@pytest.fixture(scope="session")
def trimmed_en_de(tmp_path_factory) -> tuple[Path, dict]:
    """``livetrans trim-vocab --langs en,de`` on the samples: the file and its report."""
    from app.vocab_trim.cli import main

    out = tmp_path_factory.mktemp("trim") / "en-de.gguf"
    report = out.with_suffix(".json")
    assert main(["--langs", "en,de", "--out", str(out), "--report", str(report),
                 "--corpus", f"de={SAMPLES / 'mono' / 'de.txt'}",
                 "--corpus", f"en={SAMPLES / 'flores_layout' / 'dev' / 'eng_Latn.dev'}",
                 "--check", f"en={SAMPLES / 'acl6060_layout' / 'dev' / 'en.txt'}"]) == 0
    return out, json.loads(report.read_text())
