"""One loader for a model and what is read from it: runtime, vocabulary, prompt format.

The server, the eval harness, the benches and the tests all load a model here, so they
run the same context settings and the same prompt format (with the model's BOS token, as
the chat template expects it). Tools that need only the tokenizer call ``load_vocab``,
which reads no weights.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.engine.runtime import LlamaRuntime, RuntimeConfig
from app.engine.vocab import LlamaVocab
from app.model_files import ModelFileError, resolve_model_path
from app.settings import ModelSettings
from app.translation.prompts import (
    ChatTemplateError,
    ChatTemplateFormat,
    PromptFormat,
    TranslationPrompt,
    choose_prompt_format,
    render_plain_chat,
)
from app.vocab_trim.gguf_rewrite import LANGS_KEY

ChatRenderer = Callable[[list[dict[str, str]]], TranslationPrompt]


@dataclass
class LoadedModel:
    """A model ready to run: its file, its llama.cpp runtime and its prompt format."""

    path: Path
    runtime: LlamaRuntime
    prompt_format: PromptFormat

    @property
    def served_languages(self) -> frozenset[str] | None:
        """The languages a model written by ``livetrans trim-vocab`` keeps tokens for (its
        ``livetrans.vocab_trim.langs``); None for a model with its whole vocabulary."""
        langs = self.runtime.metadata(LANGS_KEY)
        return frozenset(x for x in langs.split(",") if x) if langs else None

    @property
    def vocab(self) -> LlamaVocab:
        return self.runtime.tok

    @property
    def render_chat(self) -> ChatRenderer:
        """How chat messages become a prompt: the model's template, else plain turns."""
        if isinstance(self.prompt_format, ChatTemplateFormat):
            return self.prompt_format.render_chat
        return render_plain_chat

    def close(self) -> None:
        self.runtime.close()


def load_model(settings: ModelSettings | None = None, **overrides: object) -> LoadedModel:
    """Load the model ``settings`` name (``overrides`` replace single fields, e.g.
    ``parallel=1`` for a tool that runs one sequence)."""
    settings = (settings or ModelSettings()).model_copy(update=overrides)
    path = resolve_model_path(settings.model)
    runtime = LlamaRuntime(RuntimeConfig(
        model_path=path, n_ctx=settings.n_ctx, n_threads=settings.n_threads,
        n_gpu_layers=settings.n_gpu_layers, n_ubatch=settings.n_ubatch,
        verbose=settings.verbose_llama,
        n_seq=settings.parallel, core_loans=not settings.no_core_loans,
    ))
    try:
        fmt = prompt_format_of(runtime, path, settings.prompt_format)
    except ModelFileError:
        runtime.close()
        raise
    return LoadedModel(path=path, runtime=runtime, prompt_format=fmt)


class ModelInfo(Protocol):
    """What the prompt format is chosen from: a runtime, or a vocab-only load."""

    @property
    def bos_token(self) -> int: ...

    def chat_template(self) -> str | None: ...

    def metadata(self, key: str) -> str | None: ...


METADATA_KEYS = ("general.name", "general.basename", "general.organization",
                 "general.finetune", "general.architecture")


def prompt_format_of(model: ModelInfo, path: Path, force: str | None) -> PromptFormat:
    """The prompt format of the model at ``path`` (its chat template, family, BOS and EOS), or
    one line naming the model and ``--prompt-format`` (``ModelFileError``): a template
    that cannot carry the prompt must stop the server, never answer with its own text."""
    bos, eos = _special_texts(model)
    try:
        return choose_prompt_format(
            model.chat_template(),
            bos_token=bos,
            eos_token=eos,
            force=force,
            metadata={key: model.metadata(key) for key in METADATA_KEYS},
        )
    except ChatTemplateError as exc:
        raise ModelFileError(
            f"{path.name}: {exc}; serve it with --prompt-format few-shot (as a base model) "
            f"or --prompt-format chat-generic, or use a model whose template works") from None
    except ValueError as exc:
        raise ModelFileError(f"{path.name}: {exc} (--prompt-format)") from None


def _special_texts(model: ModelInfo) -> tuple[str, str]:
    """The BOS and EOS tokens as the chat template writes them (``{{ bos_token }}``,
    ``{{ eos_token }}``): their own text in the model's vocabulary (``<bos>`` for Gemma,
    ``<｜hy_begin▁of▁sentence｜>`` for Hunyuan), "" for a token the model lacks. A Gemma
    name in another vocabulary would be tokenized as plain text: the prompt would start
    without its BOS, and an earlier answer would not end."""
    ll, vocab = getattr(model, "ll", None), getattr(model, "vocab", None)
    if ll is None or vocab is None:  # a stand-in without llama.cpp handles
        return ("<bos>" if model.bos_token >= 0 else ""), ""

    def text(token: int) -> str:
        if token < 0:
            return ""
        buf = ctypes.create_string_buffer(256)
        n = ll.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)  # specials as text
        return buf.raw[:n].decode("utf-8", "replace") if n > 0 else ""

    return text(model.bos_token), text(int(ll.llama_vocab_eos(vocab)))


def load_vocab(model: str | Path | None = None) -> LlamaVocab:
    """Only the tokenizer of ``model`` (default: the bundled one): no weights, no context."""
    return LlamaVocab.load(resolve_model_path(model))
