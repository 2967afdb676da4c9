"""Tokenizer access over llama.cpp's vocabulary, with or without the model's weights.

The runtime uses it for prompts; drafter builders load only the vocabulary
(``LlamaVocab.load``), which takes a fraction of a second and no weights.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

from app.engine.llama_lib import import_llama, silence_llama_logs


class LlamaVocab:
    def __init__(self, ll, vocab, owner=None) -> None:  # noqa: ANN001 - ctypes handles
        self.ll = ll
        self.vocab = vocab
        self._owner = owner  # a vocab-only model to free with us
        self.n_vocab = int(ll.llama_vocab_n_tokens(vocab))
        self._piece_buf = ctypes.create_string_buffer(256)
        self._piece_cache: dict[int, bytes] = {}

    @classmethod
    def load(cls, model_path: Path) -> LlamaVocab:
        """Load only the vocabulary of a GGUF file."""
        ll = import_llama()
        silence_llama_logs(ll)
        params = ll.llama_model_default_params()
        params.vocab_only = True
        model = ll.llama_model_load_from_file(str(model_path).encode(), params)
        if not model:
            raise RuntimeError(f"could not load the vocabulary of {model_path}")
        vocab = cls(ll, ll.llama_model_get_vocab(model), owner=model)
        vocab.model_name = Path(model_path).name
        return vocab

    model_name: str = ""

    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (self.ll.llama_token * capacity)()
        n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_bos, special)
        if n < 0:
            capacity = -n
            buf = (self.ll.llama_token * capacity)()
            n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_bos,
                                       special)
        return list(buf[:n])

    def token_bytes(self, token: int) -> bytes:
        """The raw bytes of one token (may be part of a multi-byte UTF-8 character)."""
        cached = self._piece_cache.get(token)
        if cached is not None:
            return cached
        n = self.ll.llama_token_to_piece(self.vocab, token, self._piece_buf, 256, 0, False)
        if n < 0:
            big = ctypes.create_string_buffer(-n)
            n = self.ll.llama_token_to_piece(self.vocab, token, big, -n, 0, False)
            piece = big.raw[:n]
        else:
            piece = self._piece_buf.raw[:n]
        self._piece_cache[token] = piece
        return piece

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self.ll.llama_vocab_is_eog(self.vocab, token))

    def identity(self) -> str:
        """A fingerprint of the tokenizer: size plus a hash of a sample of pieces."""
        h = hashlib.sha256(str(self.n_vocab).encode())
        for tok in range(0, self.n_vocab, max(1, self.n_vocab // 4096)):
            h.update(self.token_bytes(tok))
        return f"{self.n_vocab}:{h.hexdigest()[:16]}"

    def close(self) -> None:
        if self._owner is not None:
            self.ll.llama_model_free(self._owner)
            self._owner = None
