"""A backend without a model for the steps' tests: one token per word (its leading space
included), and scripted results that record each generation request."""

from __future__ import annotations

import re

from app.engine.generation import GenerationResult
from app.translation.backend import GenerationRequest
from app.translation.prompts import TranslationPrompt, user

BOS = 1


class FakeBackend:
    """``TranslationBackend`` over a vocabulary that grows as text is tokenized."""

    def __init__(self, *results: GenerationResult) -> None:
        self.pieces: dict[int, str] = {BOS: ""}
        self.ids: dict[str, int] = {}
        self.results = list(results)
        self.requests: list[GenerationRequest] = []

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        ids = [BOS] if add_bos else []
        for piece in re.findall(r"\s*\S+|\s+$", text):
            if piece not in self.ids:
                self.ids[piece] = len(self.pieces) + 1
                self.pieces[self.ids[piece]] = piece
            ids.append(self.ids[piece])
        return ids

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(self.pieces[t] for t in tokens)

    def token_bytes(self, token: int) -> bytes:
        return self.pieces[token].encode()

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        self.requests.append(req)
        return self.results.pop(0)

    def result(self, text: str, finish: str = "stop", looped: bool = False,
               decode_ms: float = 1.0) -> GenerationResult:
        """A generation whose answer is ``text`` (tokens from this vocabulary)."""
        return GenerationResult(tokens=self.tokenize(text), text=text, finish_reason=finish,
                                prompt_tokens=3, prompt_tokens_cached=0, looped=looped,
                                decode_ms=decode_ms, forward_passes=1)


def prompt(source: str, *, clean_framing: bool = False) -> TranslationPrompt:
    """A prompt whose only part is the source (what the steps read of a prompt)."""
    return TranslationPrompt(parts=(user(source),), source=source,
                             clean_framing=clean_framing)
