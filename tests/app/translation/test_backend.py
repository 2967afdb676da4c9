"""The translation backend seam (``app.translation.backend``): a backend that is no
llama.cpp model satisfies the protocol and drives the translator.

The fake is a test double for the model (one token per character, a fixed answer): it
tests the seam, not a user path; the real model's path is ``test_translator.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from app.translation.backend import (
    BackendHealth,
    BackendRunner,
    BackendService,
    GenerationRequest,
    GenerationResult,
    TranslationBackend,
    run_to_end,
)
from app.translation.llama_backend import LlamaBackend, LlamaRunner, StandaloneLlamaBackend
from app.translation.prompts import FewShotFormat
from app.translation.sessions import Session, SessionStore
from app.translation.translator import (
    JobControl,
    TranslateOptions,
    Translator,
    UpdateSession,
    run_update,
)

ANSWER = " Guten Morgen zusammen."


class CharBackend:
    """One token per character; every generation answers ``ANSWER``, accepting the draft's
    prefix it agrees with (what verification would keep at beta 0)."""

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        return ([1] if add_bos else []) + [ord(ch) for ch in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens if t > 1)

    def token_bytes(self, token: int) -> bytes:
        return chr(token).encode()

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        self.requests.append(req)
        out = self.tokenize(ANSWER)
        result = GenerationResult(tokens=out, text=ANSWER, finish_reason="stop",
                                  prompt_tokens=len(req.prompt_tokens), prompt_tokens_cached=0,
                                  forward_passes=1, decode_ms=1.0)
        agreed = next((i for i, (a, b) in enumerate(zip(req.draft, out, strict=False))
                       if a != b), min(len(req.draft), len(out)))
        result.drafts.add("ssbd", len(req.draft), agreed)
        return result


class InlineRunner:
    """Runs a job at once on the caller's thread (a remote backend's runner would run it
    on a thread of its own)."""

    def __init__(self, backend: TranslationBackend) -> None:
        self.backend = backend
        self.calls: list[dict] = []

    async def run(self, job, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.calls.append(kwargs)
        return await job(self.backend)


def test_a_backend_without_llama_satisfies_the_protocol() -> None:
    assert isinstance(CharBackend(), TranslationBackend)
    runner: BackendRunner = InlineRunner(CharBackend())
    assert callable(runner.run)


def test_the_llama_adapters_are_the_first_implementation(engine) -> None:  # noqa: ANN001
    backend = StandaloneLlamaBackend(engine)
    assert isinstance(backend, TranslationBackend)
    assert backend.detokenize(backend.tokenize(" Hallo Welt.")) == " Hallo Welt."
    out = run_to_end(run_update(backend, FewShotFormat().translation("Yes.", "en", "de"),
                                TranslateOptions(target_lang="de"), True))
    assert out.result.text.strip() and out.result.forward_passes > 0


def test_the_llama_runner_hands_each_job_a_backend_over_its_engine(engine) -> None:  # noqa: ANN001
    class InlineWorker:  # ``EngineWorker.submit``, run inline on the test's engine
        async def submit(self, fn, **kwargs):  # noqa: ANN001, ANN003, ANN202
            return await fn(engine)

    async def job(backend):  # noqa: ANN001, ANN202
        return backend

    seen = asyncio.run(LlamaRunner(InlineWorker()).run(job))  # type: ignore[arg-type]
    assert isinstance(seen, LlamaBackend) and seen.engine is engine


def test_the_llama_runner_is_the_servers_backend_service(engine) -> None:  # noqa: ANN001
    """What the server reads of the backend without running a job: its health (the
    worker's queue depth and breakage), queue positions, tokens and shutdown."""
    from types import SimpleNamespace

    stopped: list[float] = []

    async def shutdown(timeout: float) -> None:
        stopped.append(timeout)

    worker = SimpleNamespace(depth=3, broken="the scheduler loop failed", engine=engine,
                             overload=lambda: "server busy", next_seq=lambda: 7,
                             shutdown=shutdown)
    runner: BackendService = LlamaRunner(worker)  # type: ignore[arg-type]
    assert runner.health() == BackendHealth(queue_depth=3, broken="the scheduler loop failed")
    assert runner.overload() == "server busy" and runner.next_seq() == 7
    ids = engine.rt.tokenize(" Hallo Welt.")
    assert runner.detokenize(ids) == " Hallo Welt."
    assert b"".join(runner.token_bytes(t) for t in ids) == b" Hallo Welt."
    asyncio.run(runner.shutdown(5.0))
    assert stopped == [5.0]


def test_a_job_that_suspends_is_refused_by_run_to_end() -> None:
    async def waits() -> None:
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="BackendRunner"):
        run_to_end(waits())


def test_one_update_runs_on_any_backend() -> None:
    backend = CharBackend()
    prompt = FewShotFormat().translation("Good morning everyone.", "en", "de")
    draft = backend.tokenize(" Guten Morgen alle.")
    out = run_to_end(run_update(backend, prompt, TranslateOptions(target_lang="de", mask_k=3),
                                False, draft_tokens=draft))
    req = backend.requests[-1]
    assert list(req.draft) == draft
    assert req.bias_limit == len(draft) - 1  # the draft's closing "." is verified unbiased
    assert req.max_tokens <= 3 * len(backend.tokenize(prompt.source)) + 16
    assert out.result.text == ANSWER and out.draft == out.result.tokens
    assert out.display == ANSWER[:-3].strip()  # display-only mask-k, by tokens
    assert out.result.ssbd_accepted_tokens == len(" Guten Morgen ")


def test_the_translator_drives_a_session_through_the_seam() -> None:
    backend = CharBackend()
    runner = InlineRunner(backend)
    translator = Translator(runner, FewShotFormat(), SessionStore())
    session = Session("seam")
    opts = TranslateOptions(target_lang="de")

    def update(text: str, final: bool, seq: int):  # noqa: ANN202
        return asyncio.run(translator.translate(
            text, opts, is_final=final, session=UpdateSession(session=session, seq=seq),
            job=JobControl(queue_seq=seq)))

    first = update("Good morning", False, 1)
    assert first.revision == 1 and list(backend.requests[0].draft) == []
    second = update("Good morning everyone", False, 2)
    # the previous translation is the next update's draft, all of it accepted
    assert list(backend.requests[1].draft) == backend.tokenize(ANSWER)
    assert second.revision == 2 and second.result.ssbd_accepted_tokens == len(ANSWER)
    final = update("Good morning everyone.", True, 3)
    assert final.is_final and final.display_text == ANSWER.strip()
    assert [c["queue_seq"] for c in runner.calls] == [1, 2, 3]
