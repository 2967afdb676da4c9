"""DictSpec: a corpus dictionary of token prefix -> most probable continuation.

Built offline (``livetrans build-dict``, see ``drafters/build.py``) from a monolingual
corpus; at decode time the longest suffix of the output (8 down to 1 tokens) that is a key
proposes its stored continuation. Once a word has started ("▁Wissen"), its end
("schaftler") is nearly certain, and the target model verifies it in the same pass.

Storage: a ``marisa_trie.BytesTrie`` whose keys are token-id sequences *reversed* and
encoded one code point per token (``chr(0x10000 + id)``), so one ``prefixes()`` call on
the reversed history returns every matching suffix at once; the longest wins. Values are
continuations packed as 3-byte big-endian ids. A small JSON header records the tokenizer
identity, the build parameters and the corpus hash, and loading with another tokenizer is
refused.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import marisa_trie

from drafters.base import DraftContext

MAGIC = b"LTDICT1\n"
MAX_KEY = 8
_OFFSET = 0x10000


def encode_key(tokens: Sequence[int]) -> str:
    """Token ids, last first, one code point each."""
    return "".join([chr(_OFFSET + t) for t in reversed(tokens)])


def pack_tokens(tokens: Sequence[int]) -> bytes:
    return b"".join(t.to_bytes(3, "big") for t in tokens)


def unpack_tokens(data: bytes) -> list[int]:
    return [(data[i] << 16) | (data[i + 1] << 8) | data[i + 2] for i in range(0, len(data), 3)]


class DictionaryMismatchError(ValueError):
    """The dictionary was built for another tokenizer."""


@dataclass
class DictionaryDrafter:
    trie: marisa_trie.BytesTrie
    header: dict = field(default_factory=dict)
    name: str = "dictionary"

    @classmethod
    def from_entries(cls, entries: dict[tuple[int, ...], tuple[int, ...]],
                     header: dict | None = None) -> DictionaryDrafter:
        trie = marisa_trie.BytesTrie(
            (encode_key(prefix), pack_tokens(cont)) for prefix, cont in entries.items()
        )
        return cls(trie, dict(header or {}, entries=len(entries)))

    def save(self, path: Path) -> None:
        head = json.dumps(self.header, ensure_ascii=False).encode()
        path.write_bytes(MAGIC + struct.pack(">I", len(head)) + head + self.trie.tobytes())

    @classmethod
    def load(cls, path: Path, tokenizer_identity: str | None = None) -> DictionaryDrafter:
        data = Path(path).read_bytes()
        if not data.startswith(MAGIC):
            raise ValueError(f"{path} is not a livetrans dictionary")
        (n,) = struct.unpack(">I", data[len(MAGIC):len(MAGIC) + 4])
        start = len(MAGIC) + 4
        header = json.loads(data[start:start + n])
        if tokenizer_identity and header.get("tokenizer") not in (None, tokenizer_identity):
            raise DictionaryMismatchError(
                f"{path} was built for tokenizer {header.get('tokenizer')}, "
                f"not {tokenizer_identity}")
        trie = marisa_trie.BytesTrie().frombytes(data[start + n:])
        return cls(trie, header)

    def __len__(self) -> int:
        return len(self.trie)

    def lookup(self, history: Sequence[int]) -> list[int]:
        """The continuation stored for the longest suffix of ``history`` that is a key."""
        if not history:
            return []
        matches = self.trie.prefixes(encode_key(history[-MAX_KEY:]))
        if not matches:
            return []
        # prefixes() lists matching keys shortest first: the last is the longest suffix
        return unpack_tokens(self.trie[matches[-1]][0])

    def propose(self, ctx: DraftContext, k: int) -> list[int]:
        return self.lookup(ctx.history)[:k]
