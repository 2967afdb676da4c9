"""Tokenizer access over llama.cpp's vocabulary, with or without the model's weights.

The runtime uses it for prompts; drafter builders load only the vocabulary
(``LlamaVocab.load``), which takes a fraction of a second and no weights.

Threads. In the server this object is used from two threads at once: the event loop
(display masks detokenize; the jobs tokenize prompts and detokenize drafts) and the step
scheduler's thread (every generated token's bytes, end-of-generation checks),
while that thread also runs ``llama_decode`` on the model. ctypes releases the GIL for
every C call, so C calls really do overlap. Two rules make every method safe to call from
any thread:

- No buffer is shared between calls: each C call writes into a buffer of its own. (A
  single shared piece buffer let two threads read each other's bytes and cache a token's
  piece wrongly for the life of the process.)
- Every call into llama.cpp's tokenizer goes through ``_c_lock``. llama.cpp documents its
  vocabulary as read-only after loading, but the lock costs about a microsecond uncontended
  and makes this independent of how a given llama.cpp version implements tokenizer caches.

``_c_lock`` is a leaf lock: nothing else is ever acquired while it is held, so it may be
taken under any other lock of the server (lock order: app/engine/__init__.py). Pieces and
end-of-generation flags are memoised per token; two threads filling the same entry write
the same value, so the dictionaries need no lock of their own.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from array import array
from collections import OrderedDict
from pathlib import Path

from app.engine.llama_lib import import_llama, silence_llama_logs

# Tokenizations remembered: texts of at most this many characters (prompt parts, sources),
# at most this many of them (bounded whatever clients send: ~10 MB at worst).
TOKENIZE_CACHE_MAX_CHARS = 2048
TOKENIZE_CACHE_ENTRIES = 1024


class LlamaVocab:
    def __init__(self, ll, vocab, owner=None) -> None:  # noqa: ANN001 - ctypes handles
        self.ll = ll
        self.vocab = vocab
        self._owner = owner  # a vocab-only model to free with us
        self.n_vocab = int(ll.llama_vocab_n_tokens(vocab))
        self._c_lock = threading.Lock()  # leaf lock around every tokenizer C call
        self._piece_cache: dict[int, bytes] = {}
        self._eog_cache: dict[int, bool] = {}
        # recent texts' ids (least recently used first), under ``_c_lock``
        self._text_cache: OrderedDict[tuple[str, bool, bool], array[int]] = OrderedDict()

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
        """The ids of ``text``; recent short texts are remembered (``TOKENIZE_CACHE``).

        Why remember: every update of a session tokenizes the same prompt parts again (the
        few-shot examples, the context, the labels), and Gemma's tokenizer took 1.4-2.7 ms
        an update for them (``livetrans.timings.tokenize_ms``, measured), on the event loop
        while the forward passes want both cores."""
        cacheable = len(text) <= TOKENIZE_CACHE_MAX_CHARS
        key = (text, add_bos, special)
        if cacheable:
            with self._c_lock:
                hit = self._text_cache.get(key)
                if hit is not None:
                    self._text_cache.move_to_end(key)
                    return hit.tolist()
        ids = self._tokenize(text, add_bos, special)
        if cacheable:
            with self._c_lock:
                self._text_cache[key] = array("i", ids)  # 4 bytes an id
                while len(self._text_cache) > TOKENIZE_CACHE_ENTRIES:
                    self._text_cache.popitem(last=False)
        return ids

    def _tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        with self._c_lock:
            buf = (self.ll.llama_token * capacity)()
            n = self.ll.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_bos,
                                       special)
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
        piece = self._piece(token)
        self._piece_cache[token] = piece
        return piece

    def _piece(self, token: int) -> bytes:
        """Ask llama.cpp for one token's bytes, in a buffer no other call shares."""
        size = 64
        with self._c_lock:
            while True:
                buf = ctypes.create_string_buffer(size)
                n = self.ll.llama_token_to_piece(self.vocab, token, buf, size, 0, False)
                if n >= 0:
                    return buf.raw[:n]
                size = -n

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        cached = self._eog_cache.get(token)
        if cached is None:
            with self._c_lock:
                cached = bool(self.ll.llama_vocab_is_eog(self.vocab, token))
            self._eog_cache[token] = cached
        return cached

    # -- what the file says about itself (a vocab-only load reads the metadata too) -------
    def chat_template(self) -> str | None:
        """The model's chat template (None without one, or once closed): the start-up
        check of ``serve`` judges it without loading the weights."""
        if self._owner is None:
            return None
        raw = self.ll.llama_model_chat_template(self._owner, None)
        return raw.decode("utf-8", "replace") if raw else None

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as text (None when the file has no such key)."""
        if self._owner is None:
            return None
        buf = ctypes.create_string_buffer(4096)
        n = self.ll.llama_model_meta_val_str(self._owner, key.encode(), buf, 4096)
        return None if n < 0 else buf.value.decode("utf-8", "replace")

    @property
    def bos_token(self) -> int:
        return int(self.ll.llama_vocab_bos(self.vocab))

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
