"""Shared fixtures: the real default model, and a real server on loopback."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval.local_server import LocalServer, free_port  # noqa: F401 - re-exported

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# servers the tests start keep their transcripts here, never in the user's home
os.environ.setdefault("LIVETRANS_DATA_DIR", tempfile.mkdtemp(prefix="livetrans-test-data-"))

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "eval" / "samples"


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The datasets' folder layout (``flores200/``, ``acl6060/``, ``asr_partials/``,
    ``mono/``) over the small samples in eval/samples, so every test runs on a fresh clone.

    ``LIVETRANS_TEST_DATA=/path/to/data`` runs the same tests on the full datasets instead.
    """
    full = os.environ.get("LIVETRANS_TEST_DATA")
    if full:
        return Path(full)
    root = tmp_path_factory.mktemp("data")
    (root / "flores200").symlink_to(SAMPLES / "flores_layout")
    (root / "acl6060").symlink_to(SAMPLES / "acl6060_layout")
    (root / "mono").symlink_to(SAMPLES / "mono")
    (root / "asr_partials").mkdir()
    for name in ("flores200_dev_en.jsonl", "acl6060_dev_en.jsonl"):
        (root / "asr_partials" / name).symlink_to(SAMPLES / "asr_sample_en.jsonl")
    return root


@pytest.fixture(scope="session")
def runtime():
    """One real Gemma 3 270M context for all engine tests."""
    from app.loader import load_model
    from app.settings import ModelSettings

    rt = load_model(ModelSettings(model=None, n_ctx=4096, parallel=1)).runtime
    yield rt
    rt.close()


@pytest.fixture()
def engine(runtime):
    from app.engine.engine import Engine

    runtime.clear()
    return Engine(runtime)


# The benchmarks' in-process server is the tests' real server too.
LiveServer = LocalServer


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    with LiveServer(max_source_chars=2000, queue_size=32, max_live_sessions=64) as server:
        yield server


@pytest.fixture(scope="session")
def openai_client(live_server):
    from openai import OpenAI

    return OpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0,
                  timeout=120)


@pytest.fixture(scope="session")
def trimmed_en_de(tmp_path_factory) -> tuple[Path, dict]:
    """``livetrans trim-vocab --langs en,de`` over the repository's samples: the file and
    its report (tests/app/vocab_trim, and the eval harness comparing models)."""
    import json

    from app.vocab_trim.cli import main

    out = tmp_path_factory.mktemp("trim") / "en-de.gguf"
    report = out.with_suffix(".json")
    assert main(["--langs", "en,de", "--out", str(out), "--report", str(report),
                 "--corpus", f"de={SAMPLES / 'mono' / 'de.txt'}",
                 "--corpus", f"en={SAMPLES / 'flores_layout' / 'dev' / 'eng_Latn.dev'}",
                 "--check", f"en={SAMPLES / 'acl6060_layout' / 'dev' / 'en.txt'}"]) == 0
    return out, json.loads(report.read_text())


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium (Debian's, driven by Playwright) for a module's page tests; they
    skip where it is missing."""
    from tests.browser import CHROMIUM, chromium_args

    if CHROMIUM is None:
        pytest.skip("Debian package 'chromium' is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=chromium_args())
        yield browser
        browser.close()
