"""What makes ``llama-server-bench --live`` even-handed: one prompt, one token cap and one
stopping rule for both servers.

* **The prompt, pinned.** ``--prompt-format`` (default ``few-shot``) goes to ``livetrans
  serve``, and llama-server gets the very token ids livetrans makes of an update with that
  format (``app.loader.prompt_format_of`` on the same GGUF, ``tokenize_prompt`` with the
  file's own vocabulary; ``context: 0``, no glossary). Without the pin a GGUF with a chat
  template would be served a chat prompt by livetrans and a few-shot one by llama-server.
* **The cap**: livetrans's (``translation_token_cap``: 3 tokens a source token + 16, at
  most 256), counted with the file's vocabulary.
* **The stopping rule** (``STOP_RULE``): livetrans ends a generation whose output tokens
  repeat one span (``app.translation.pathology.ends_in_loop``); llama-server has no such
  rule and would run a looping update to the cap. So the llama-server client streams the
  tokens and closes the connection as soon as the same test holds (llama-server cancels
  the slot's task when its client goes away): both sides stop a loop at the same token,
  llama-server up to a token or two later (the tokens in flight when the client closes).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.translation.pathology import ends_in_loop

STOP_RULE = ("both servers stop a generation whose output tokens end in a loop "
             "(ends_in_loop): livetrans in its engine (stop_on_loop), llama-server by the "
             "client closing the token stream at the same test (the task is cancelled); "
             "otherwise both run to the stop string, end of turn or the same token cap")
MAX_CAP = 256


@dataclass
class PinnedPrompt:
    """The prompt both servers get for an update: one format, one tokenizer (the file's)."""

    model: Path
    lang: str
    format_name: str = "few-shot"
    source_lang: str = "en"
    _ids: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _caps: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        from app.loader import load_vocab, prompt_format_of

        self.vocab = load_vocab(self.model)
        self.fmt = prompt_format_of(self.vocab, self.model, self.format_name)
        probe = self.fmt.translation("x", self.source_lang, self.lang)
        stops = list(probe.stop_strings)
        if probe.stop_at_newline or probe.answer_stops:
            stops.append("\n")
        self.stops = tuple(dict.fromkeys(stops))

    def ids(self, source: str) -> list[int]:
        """The prompt's token ids, exactly as livetrans tokenizes it (``tokenize_prompt``)."""
        if source not in self._ids:
            from app.translation.prompts import tokenize_prompt

            prompt = self.fmt.translation(source, self.source_lang, self.lang)
            self._ids[source] = tokenize_prompt(prompt, self.vocab.tokenize)
        return self._ids[source]

    def cap(self, source: str) -> int:
        if source not in self._caps:  # as app.translation.steps.verify counts it
            from app.translation.prompts import clean_source

            n = len(self.vocab.tokenize(clean_source(source)))
            self._caps[source] = min(MAX_CAP, 3 * n + 16)
        return self._caps[source]

    def describe(self) -> str:
        sample = self.ids("Hello")
        return (f"prompt format: {self.format_name} (livetrans serve --prompt-format "
                f"{self.format_name}; llama-server gets the same token ids, {len(sample)} "
                f"for 'Hello' en->{self.lang}; stops {list(self.stops)!r})")


@dataclass
class Completion:
    """One llama-server answer as the client saw it."""

    text: str
    tokens: list[int]
    timings: dict[str, float]
    looped: bool  # the client stopped it (``STOP_RULE``)


async def llama_complete(client: httpx.AsyncClient, url: str, prompt: PinnedPrompt,
                         source: str, slot: int | None) -> Completion:
    """One greedy ``/completion`` with the pinned prompt, streamed token by token and closed
    at a loop; ``slot`` pins the speaker's slot (``id_slot``), as a caption server keeps a
    talk on the slot that holds its prompt."""
    body: dict = {"prompt": prompt.ids(source), "n_predict": prompt.cap(source),
                  "temperature": 0.0, "top_k": 1, "stop": list(prompt.stops),
                  "cache_prompt": True, "stream": True, "return_tokens": True,
                  "timings_per_token": True}
    if slot is not None:
        body["id_slot"] = slot
    pieces: list[str] = []
    tokens: list[int] = []
    timings: dict = {}
    looped = False
    async with client.stream("POST", f"{url}/completion", json=body) as resp:
        if resp.status_code >= 400:
            await resp.aread()
            resp.raise_for_status()
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = json.loads(line[len("data: "):])
            timings = data.get("timings") or timings
            if data.get("stop"):
                if not pieces and data.get("content"):
                    pieces.append(data["content"])
                break
            pieces.append(data.get("content") or "")
            tokens += data.get("tokens") or []
            if ends_in_loop(tokens):
                looped = True
                break  # leaving the block closes the connection: llama-server cancels
    return Completion("".join(pieces), tokens, timings, looped)


def now_ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000
