"""``serve --langs``: the trimmed copy built on first start, reused on the next, and the
full model (one warning) wherever a copy cannot be had."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from app.vocab_trim.auto import AutoTrim, copy_name, served_model, trimmed_for
from app.vocab_trim.gguf_rewrite import LANGS_KEY, TrimError, open_gguf
from tests.app.vocab_trim import ggufs
from tests.app.vocab_trim.served_langs import assert_serves_only_its_languages

EN_DE = AutoTrim(langs=("en", "de"))


def _trim_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "livetrans.trim"]


def _default_model() -> Path:
    from app.model_files import default_model_path

    return default_model_path()


class _Messages(logging.Handler):
    """The trim's log lines, for a fixture (caplog is one test's)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def first_start(tmp_path_factory) -> tuple[Path, list[str]]:
    """The real default model's en,de copy, built into an empty cache: the cache folder
    and what the build logged."""
    cache = tmp_path_factory.mktemp("cache")
    logger = logging.getLogger("livetrans.trim")
    handler, level = _Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        served = served_model(_default_model(), EN_DE, cache=cache)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert served.trimmed and served.langs == {"en", "de"}
    return cache, handler.lines


@pytest.mark.model
def test_a_first_start_builds_the_copy_and_a_second_reuses_it(first_start, caplog) -> None:
    cache, built = first_start
    model = _default_model()
    [path] = (cache / "trimmed").iterdir()  # the copy, and no temporary file
    assert path.name.startswith("gemma-3-270m-q4_k_m.de-en.") and path.suffix == ".gguf"
    assert any("[1/" in m for m in built) and any("tokens kept" in m for m in built)
    assert trimmed_for(path) == {"en", "de"}
    assert open_gguf(path).fields[LANGS_KEY].contents() == "de,en"
    stamp = path.stat().st_mtime_ns

    caplog.set_level(logging.INFO, logger="livetrans.trim")
    second = served_model(model, AutoTrim(langs=("de", "en")), cache=cache)  # any order
    assert second.path == path and second.trimmed and second.langs == {"en", "de"}
    assert path.stat().st_mtime_ns == stamp
    messages = [r.getMessage() for r in _trim_records(caplog)]
    assert len(messages) == 1 and "(cached)" in messages[0], messages

    from app.vocab_trim.cli import load_trim_vocab

    trimmed = load_trim_vocab(path)
    try:
        text = " Der Zug zum Flughafen fährt um 7:45 Uhr (Gleis 3), 12,5 € – pünktlich!"
        assert trimmed.detokenize(trimmed.tokenize(text)) == text
    finally:
        trimmed.close()


@pytest.mark.model
def test_a_server_with_langs_serves_the_copy_and_refuses_other_languages(
        first_start, monkeypatch) -> None:
    from openai import OpenAI

    from tests.conftest import LiveServer

    cache, _ = first_start
    monkeypatch.setenv("LIVETRANS_CACHE_DIR", str(cache))
    with LiveServer(langs=["en", "de"]) as server:
        assert server.state.served_langs == {"en", "de"} and server.state.langs_given
        client = OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
        first = client.chat.completions.create(
            model="livetrans", messages=[{"role": "user", "content": "Good morning."}],
            extra_body={"target_lang": "de"}, max_tokens=8)
        # the en-de preamble was decoded at start: the first update copies it
        assert first.usage.prompt_tokens_details.cached_tokens > 20
        assert_serves_only_its_languages(client, "serves de, en (serve --langs)")
        models = client.models.list()
        assert models.data[0].id == "gemma-3-270m-q4_k_m"  # the model's own name


def test_without_langs_nothing_changes(tmp_path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(ggufs.tiny_model())
    assert served_model(model, None, cache=tmp_path) == (served := served_model(
        model, AutoTrim(langs=()), cache=tmp_path))
    assert served.path == model and served.langs is None and not served.trimmed
    assert not (tmp_path / "trimmed").exists()


def test_no_trim_serves_the_full_model_for_the_languages(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="livetrans.trim")
    model = tmp_path / "m.gguf"
    model.write_bytes(ggufs.tiny_model())
    served = served_model(model, AutoTrim(langs=("en", "de"), trim=False), cache=tmp_path)
    assert served.path == model and served.langs == {"en", "de"} and not served.trimmed
    assert "--no-trim" in _trim_records(caplog)[0].getMessage()
    assert not (tmp_path / "trimmed").exists()


def test_a_model_that_cannot_be_trimmed_is_served_whole_with_one_warning(tmp_path,
                                                                          caplog) -> None:
    kvs = [k for k in ggufs.model_kvs() if b"tokenizer.ggml.model" not in k]
    kvs.append(ggufs.kv_str("tokenizer.ggml.model", "gpt2"))
    infos, data = ggufs.model_tensors()
    model = tmp_path / "bpe.gguf"
    model.write_bytes(ggufs.gguf_file(kvs, infos, data))
    caplog.set_level(logging.INFO, logger="livetrans.trim")
    served = served_model(model, EN_DE, cache=tmp_path / "cache")
    assert served.path == model and served.langs == {"en", "de"} and not served.trimmed
    warnings = [r for r in _trim_records(caplog) if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    message = warnings[0].getMessage()
    assert "cannot trim bpe.gguf" in message and "'gpt2'" in message
    assert "serving the full model" in message and "\n" not in message
    assert not list((tmp_path / "cache" / "trimmed").iterdir())  # nothing half-written


@pytest.mark.parametrize("blocker", ["a file", "read-only"])
def test_a_cache_folder_that_cannot_be_written_falls_back_to_the_full_model(
        tmp_path, caplog, blocker) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(ggufs.tiny_model())
    cache = tmp_path / "cache"
    if blocker == "a file":
        cache.write_text("not a folder")
    elif os.geteuid() == 0:  # root writes into read-only folders, not into /proc
        cache = Path("/proc/livetrans-cache")
    else:
        (cache / "trimmed").mkdir(parents=True)
        (cache / "trimmed").chmod(0o500)
    caplog.set_level(logging.INFO, logger="livetrans.trim")
    try:
        served = served_model(model, EN_DE, cache=cache)
    finally:
        if blocker != "a file" and os.geteuid() != 0:
            (cache / "trimmed").chmod(0o700)
    assert served.path == model and served.langs == {"en", "de"} and not served.trimmed
    warnings = [r.getMessage() for r in _trim_records(caplog) if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "cannot write the trimmed copy" in warnings[0], warnings
    assert "serving the full model" in warnings[0]


def test_the_copy_is_named_by_model_languages_and_corpora(tmp_path) -> None:
    model, other = tmp_path / "m.gguf", tmp_path / "n.gguf"
    model.write_bytes(ggufs.tiny_model())
    other.write_bytes(ggufs.tiny_model() + b"\0" * 32)
    corpus = tmp_path / "de.txt"
    corpus.write_text("Guten Morgen.\n", encoding="utf-8")
    name = copy_name(model, EN_DE)
    assert name.startswith("m.de-en.") and name.endswith(".gguf")
    assert copy_name(model, AutoTrim(langs=("de", "en"))) == name
    with_corpus = copy_name(model, AutoTrim(langs=("en", "de"), corpora=(("de", corpus),)))
    changed = {copy_name(other, EN_DE).replace("n.", "m.", 1),
               copy_name(model, AutoTrim(langs=("en", "fr"))), with_corpus}
    assert name not in changed and len(changed) == 3
    corpus.write_text("Guten Abend.\n", encoding="utf-8")  # the corpus's content counts
    assert copy_name(model, AutoTrim(langs=("en", "de"), corpora=(("de", corpus),))) \
        != with_corpus


def test_an_already_trimmed_model_is_served_as_it_is(tmp_path) -> None:
    model = tmp_path / "cut.gguf"
    model.write_bytes(ggufs.gguf_file([*ggufs.model_kvs(),
                                       ggufs.kv_str(LANGS_KEY, "de,en")],
                                      *ggufs.model_tensors()))
    served = served_model(model, EN_DE, cache=tmp_path)
    assert served.path == model and served.langs == {"en", "de"}
    assert not (tmp_path / "trimmed").exists()
    for trim in (True, False):  # --no-trim cannot give it back the tokens it lacks
        with pytest.raises(TrimError, match="trimmed for de,en, not for ja"):
            served_model(model, AutoTrim(langs=("en", "ja"), trim=trim), cache=tmp_path)
