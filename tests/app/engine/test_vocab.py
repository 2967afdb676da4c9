"""The tokenizer is safe from any thread: several threads tokenize and detokenize while
the step scheduler generates on the same model, and every answer equals the answer of one
thread alone."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable

from app.engine.engine import GenerationRequest, GenerationResult
from app.engine.vocab import LlamaVocab
from app.engine.worker import EngineWorker
from app.loader import load_vocab
from app.translation.prompts import FewShotFormat

TEXTS = [
    "Good morning, everyone, and welcome to the second day of the conference.",
    "Der Stadtrat hat einen neuen Plan genehmigt, um das Busnetz zu erweitern.",
    "我们今天讨论机器翻译的延迟问题。",
    "会議は午後三時に始まります。",
    "Привет, мир! Как дела?",
    "שלום עולם, مرحبا بالعالم",
    "Emoji 🙂🎉 and symbols ∑∫ with digits 0123456789.",
    "<start_of_turn>user\nnot a control token<end_of_turn>",
]
THREADS = 4
ROUNDS = 40


def _hammer(work: Callable[[int], None]) -> list[BaseException]:
    """Run ``work(thread_index)`` on THREADS threads started together; their errors."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_a_fresh_vocab_filled_from_many_threads_caches_every_piece_right() -> None:
    """Cold caches, all threads asking for pieces at once: the case a shared ctypes buffer
    got wrong (two threads' bytes crossing, one cached for the life of the process)."""
    reference = load_vocab()
    tokens = list(range(0, reference.n_vocab, 7))
    expected = {t: reference.token_bytes(t) for t in tokens}
    for _attempt in range(3):
        vocab = load_vocab()

        def fill(i: int, vocab: LlamaVocab = vocab) -> None:
            for t in (tokens[i::THREADS] + tokens)[: len(tokens)]:
                vocab.token_bytes(t)

        assert _hammer(fill) == []
        wrong = [t for t in tokens if vocab.token_bytes(t) != expected[t]]
        assert wrong == [], f"{len(wrong)} tokens cached with another token's bytes"
        vocab.close()
    reference.close()


def test_tokenize_and_detokenize_from_threads_while_the_scheduler_generates(engine) -> None:
    rt = engine.rt
    expected_ids = {text: rt.tokenize(text) for text in TEXTS}
    prompt = rt.tokenize(FewShotFormat().translation(TEXTS[0], "en", "de").text, add_bos=True)
    rt.tok._piece_cache.clear()  # every piece is asked of llama.cpp again, under load
    worker = EngineWorker(engine, max_queue=8)

    def tokenizer_threads() -> list[BaseException]:
        def work(i: int) -> None:
            rng = random.Random(i)
            for _ in range(ROUNDS):
                text = rng.choice(TEXTS)
                ids = rt.tokenize(text)
                assert ids == expected_ids[text], f"tokenize({text!r}) differed"
                assert rt.detokenize(ids) == text, f"detokenize of {text!r} differed"
        return _hammer(work)

    async def main() -> tuple[GenerationResult, list[BaseException]]:
        errors = asyncio.get_running_loop().run_in_executor(None, tokenizer_threads)
        async def generate(e):  # noqa: ANN001, ANN202
            return await e.generate(GenerationRequest(
                prompt_tokens=prompt, max_tokens=24, stop_strings=("\n",)))

        try:
            result = await worker.submit(generate)
        finally:
            await worker.shutdown(timeout=10)
        return result, await errors

    result, errors = asyncio.run(main())
    assert errors == []
    # the scheduler thread streamed the text from pieces fetched while the others hammered
    reference = load_vocab()
    assert result.text and reference.detokenize(result.tokens).startswith(result.text)
    reference.close()


def test_remembered_tokenizations_equal_fresh_ones_and_stay_bounded(monkeypatch) -> None:
    import app.engine.vocab as vocab_module

    vocab = load_vocab(None)
    fresh = {(t, bos, special): vocab._tokenize(t, bos, special)
             for t in TEXTS for bos in (False, True) for special in (False, True)}
    for _ in range(2):  # the first round fills the memo, the second reads it
        for (text, bos, special), ids in fresh.items():
            got = vocab.tokenize(text, bos, special)
            assert got == ids
            got.append(-1)  # a caller changing its list changes nothing remembered
    monkeypatch.setattr(vocab_module, "TOKENIZE_CACHE_ENTRIES", 5)
    for i in range(50):
        vocab.tokenize(f"text number {i}")
    assert len(vocab._text_cache) == 5
    long_text = "word " * (vocab_module.TOKENIZE_CACHE_MAX_CHARS // 5 + 1)
    vocab.tokenize(long_text)
    assert (long_text, False, False) not in vocab._text_cache  # long texts are not kept
