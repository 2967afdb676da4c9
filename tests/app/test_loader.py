"""The one model loader: the server, eval and tests get the same runtime and prompt format."""

from __future__ import annotations

from app.loader import load_model, load_vocab
from app.settings import ModelSettings, ServerSettings, Settings
from app.translation.prompts import FewShotFormat


def test_model_and_server_settings_are_disjoint_and_make_up_settings() -> None:
    model, server = set(ModelSettings.model_fields), set(ServerSettings.model_fields)
    assert not model & server
    assert model | server == set(Settings.model_fields)


def test_load_model_reads_runtime_vocab_and_prompt_format() -> None:
    model = load_model(ModelSettings(model=None, n_ctx=512), parallel=2)
    try:
        assert model.runtime.n_seq == 2
        assert model.vocab is model.runtime.tok
        # the bundled model is a base model: few-shot, and chat falls back to plain turns
        assert isinstance(model.prompt_format, FewShotFormat)
        prompt = model.render_chat([{"role": "user", "content": "Hello"}])
        assert "Hello" in prompt.text
    finally:
        model.close()


def test_load_vocab_tokenizes_like_the_runtime(runtime) -> None:
    vocab = load_vocab()
    try:
        text = "Der Stadtrat hat einen Plan."
        assert vocab.tokenize(text) == runtime.tokenize(text)
    finally:
        vocab.close()
