"""One prompt, one cap and one stopping rule for both servers (``eval.bench.peer.prompt``): the
prompt on the bundled model's own vocabulary, llama-server's side on a stand-in that
streams as llama-server does (llama-server itself is not part of livetrans)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from app.model_files import resolve_model_path
from app.translation.prompts import FewShotFormat, tokenize_prompt
from eval.bench.peer.prompt import PinnedPrompt, llama_complete


@pytest.fixture(scope="module")
def prompt() -> PinnedPrompt:
    return PinnedPrompt(resolve_model_path(None), "de")


def test_llama_server_gets_the_ids_livetrans_makes_of_the_update(prompt) -> None:
    source = "The museum opens next week"
    expected = tokenize_prompt(FewShotFormat().translation(source, "en", "de"),
                               prompt.vocab.tokenize)
    assert prompt.ids(source) == expected
    assert prompt.stops == ("\n",)  # few-shot: the line ends the answer
    assert prompt.cap(source) == 3 * len(prompt.vocab.tokenize(source)) + 16
    assert prompt.cap("word " * 200) == 256
    assert "few-shot" in prompt.describe()


def _stream(chunks: list[dict], seen: list[dict]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
        return httpx.Response(200, content=body.encode(),
                              headers={"content-type": "text/event-stream"})
    return httpx.MockTransport(handler)


def _complete(prompt: PinnedPrompt, chunks: list[dict], slot: int | None):  # noqa: ANN202
    seen: list[dict] = []

    async def go():  # noqa: ANN202
        async with httpx.AsyncClient(transport=_stream(chunks, seen)) as client:
            return await llama_complete(client, "http://x", prompt, "Hello there", slot)
    return asyncio.run(go()), seen


def test_a_streamed_answer_is_put_together_with_its_timings(prompt) -> None:
    chunks = [{"content": " Hallo", "tokens": [5], "stop": False},
              {"content": " da", "tokens": [6], "stop": False,
               "timings": {"predicted_n": 2}},
              {"content": "", "tokens": [], "stop": True,
               "timings": {"predicted_n": 2, "prompt_ms": 3.0}}]
    done, seen = _complete(prompt, chunks, slot=3)
    assert done.text == " Hallo da" and done.tokens == [5, 6] and not done.looped
    assert done.timings["prompt_ms"] == 3.0
    body = seen[0]
    assert body["id_slot"] == 3 and body["stream"] and body["return_tokens"]
    assert body["prompt"] == prompt.ids("Hello there")
    assert body["n_predict"] == prompt.cap("Hello there") and body["stop"] == ["\n"]
    _, seen = _complete(prompt, chunks, slot=None)
    assert "id_slot" not in seen[0]


def test_the_client_stops_a_loop_where_livetrans_would(prompt) -> None:
    # " am Montag," as tokens 7, 8, 9 again and again: ends_in_loop holds at 12 tokens
    chunks = [{"content": p, "tokens": [t], "stop": False}
              for _ in range(10) for p, t in ((" am", 7), (" Montag", 8), (",", 9))]
    done, _ = _complete(prompt, chunks, slot=None)
    assert done.looped and len(done.tokens) == 12
    assert done.text == " am Montag," * 4
