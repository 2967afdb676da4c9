"""The translation backend seam: what the translator needs from a model, and nothing more.

``app.translation.translator`` runs one update as a *job*: a function of a
``TranslationBackend`` that tokenizes the prompt and the draft, asks for one generation
(or two, when a bad final is translated again), and judges the result. A
``BackendRunner`` runs such jobs where the model lives and awaits them from the event loop.

What a backend provides:

* **tokens**: ``tokenize`` (user text with ``special=False``, so a typed ``<eos>`` is text;
  our own prompt parts with ``special=True``), ``detokenize`` (a viewer's masked text, the
  glossary drafters) and ``token_bytes`` (one token's bytes: is it sentence-final
  punctuation, which the draft's end leaves unbiased);
* **a batched generate/verify**: ``generate(GenerationRequest) -> GenerationResult``. The
  request carries the prompt, the SSBD draft and its bias (``beta``, ``bias_limit``), the
  drafter chain and the bias of its proposals, the stops, the cancel flag and the streaming
  callback; the result carries the tokens and text, how it finished, the draft statistics
  (``result.drafts``: proposed / accepted by source) and the cost figures (prompt tokens
  and how many were cached, forward passes, decode and prompt milliseconds, time queued).
  A backend that cannot verify a draft treats it as a plain generation with no draft
  accepted (beta 0 is plain greedy decoding in any case).

The request and result types are the engine's (``app.engine.generation``): plain
dataclasses, re-exported here as the seam's vocabulary, so that the llama.cpp engine fills
them without importing the core.

llama.cpp is the first implementation (``app.translation.llama_backend``: ``LlamaBackend``
over the step engine's per-job ``ScheduledEngine`` or the benchmarks' ``Engine``, and
``LlamaRunner`` over the ``EngineWorker``). Another backend (a CTranslate2 NLLB or Marian
model, a remote OpenAI-compatible server) implements these two protocols and is handed to
``Translator`` by the composition root (``app/server.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

from app.engine.generation import GenerationRequest, GenerationResult
from app.engine.scheduler import PRIORITY_REQUEST

__all__ = ["PRIORITY_REQUEST", "BackendRunner", "GenerationRequest", "GenerationResult",
           "TranslationBackend"]

T = TypeVar("T")


@runtime_checkable
class TranslationBackend(Protocol):
    """A model as the translator uses it (see the module's docstring). Called from one job
    thread at a time per job; ``tokenize``/``detokenize``/``token_bytes`` may be called
    from any thread."""

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        """Token ids of ``text``; ``special`` parses special-token text (``<eos>``)."""
        ...

    def detokenize(self, tokens: list[int]) -> str:
        """The text of ``tokens``."""
        ...

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token (a piece may be part of a UTF-8 character)."""
        ...

    def generate(self, req: GenerationRequest) -> GenerationResult:
        """One generation: prompt in, draft verified with its bias, tokens out (blocks)."""
        ...


class BackendRunner(Protocol):
    """Runs translation jobs (functions of a ``TranslationBackend``) where the model lives,
    and awaits them on the event loop.

    ``priority``: the engine's ranks (``app.engine.scheduler``: finals, partials,
    requests). ``cancel`` ends the job's generation (the client went away, a newer partial
    superseded it); ``bypass_limit`` lets a final in when the queue is full; ``started`` is
    set when the job's first generation starts; ``queue_seq`` keeps the queue position of
    the job this one supersedes (``next_seq``).
    """

    async def run(self, job: Callable[[TranslationBackend], T], *,
                  priority: int = PRIORITY_REQUEST, cancel: threading.Event | None = None,
                  bypass_limit: bool = False, started: threading.Event | None = None,
                  queue_seq: int | None = None) -> T:
        ...
