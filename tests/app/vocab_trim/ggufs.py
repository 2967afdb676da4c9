"""Tiny GGUF files built byte by byte, so that a test can damage any field of one.

``gguf.GGUFWriter`` only writes valid files (and pads the end of the data); these builders
write exactly the bytes asked for, counts and lengths included, so a header can claim what
its bytes do not hold.
"""

from __future__ import annotations

import struct

import numpy as np

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# ggml tensor types
GGML_F32, GGML_Q4_0 = 0, 2

# SentencePiece's: unknown, bos, eos, the 256 byte tokens llama.cpp falls back to, 3 pieces
TOKENS = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), "a", "b", "ab"]
TYPES = [2, 3, 3, *[6] * 256, 1, 1, 1]
EMBD_WIDTH = 4


def string(text: str | bytes, length: int | None = None) -> bytes:
    """A GGUF string; ``length`` overrides the length field (a lie, for damage)."""
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data) if length is None else length) + data


def kv(key: str | bytes, vtype: int, payload: bytes) -> bytes:
    return string(key) + struct.pack("<I", vtype) + payload


def kv_str(key: str, value: str | bytes) -> bytes:
    return kv(key, STR, string(value))


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, U32, struct.pack("<I", value))


_PACK = {U8: "B", U32: "I", I32: "i", F32: "f", U64: "Q"}


def kv_array(key: str, item_type: int, items: list, length: int | None = None) -> bytes:
    """An array of numbers or strings; ``length`` overrides the length field."""
    n = len(items) if length is None else length
    if item_type == STR:
        body = b"".join(string(i) for i in items)
    else:
        body = struct.pack(f"<{len(items)}{_PACK[item_type]}", *items)
    return kv(key, ARR, struct.pack("<IQ", item_type, n) + body)


def tensor_info(name: str, dims: list[int], ggml_type: int = GGML_F32, offset: int = 0,
                n_dims: int | None = None) -> bytes:
    """A tensor description (``dims`` in ggml order: the row length first)."""
    n = len(dims) if n_dims is None else n_dims
    return (string(name) + struct.pack("<I", n) + struct.pack(f"<{len(dims)}Q", *dims)
            + struct.pack("<IQ", ggml_type, offset))


def gguf_file(kvs: list[bytes], infos: list[bytes], data: bytes = b"", *, version: int = 3,
              n_kv: int | None = None, n_tensors: int | None = None, magic: bytes = b"GGUF",
              alignment: int = 32) -> bytes:
    """Header, key-value pairs, tensor descriptions, padding to ``alignment``, data."""
    head = magic + struct.pack("<IQQ", version, len(infos) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    header = head + b"".join(kvs) + b"".join(infos)
    return header + b"\0" * (-len(header) % alignment) + data


def model_kvs() -> list[bytes]:
    """The metadata of a tiny SentencePiece ('llama') model."""
    return [kv_str("general.architecture", "llama"),
            kv_str("tokenizer.ggml.model", "llama"),
            kv_array("tokenizer.ggml.tokens", STR, TOKENS),
            kv_array("tokenizer.ggml.scores", F32, [-float(i) for i in range(len(TOKENS))]),
            kv_array("tokenizer.ggml.token_type", I32, TYPES),
            kv_u32("tokenizer.ggml.bos_token_id", 1),
            kv_u32("tokenizer.ggml.eos_token_id", 2)]


def model_tensors(n_tokens: int = len(TOKENS)) -> tuple[list[bytes], bytes]:
    """``token_embd.weight`` (one row per token) and ``output_norm.weight``: descriptions
    and data (each tensor's bytes a multiple of 32, so no padding between them)."""
    embd = np.arange(n_tokens * EMBD_WIDTH, dtype=np.float32)
    norm = np.ones(8, dtype=np.float32)
    infos = [tensor_info("token_embd.weight", [EMBD_WIDTH, n_tokens], offset=0),
             tensor_info("output_norm.weight", [8], offset=_padded(embd.nbytes))]
    data = embd.tobytes() + b"\0" * (_padded(embd.nbytes) - embd.nbytes) + norm.tobytes()
    return infos, data


def _padded(n: int, alignment: int = 32) -> int:
    return n + (-n % alignment)


def tiny_model(**kwargs) -> bytes:  # noqa: ANN003 - gguf_file's options
    """A complete, valid tiny model (``gguf.GGUFReader`` reads it)."""
    infos, data = model_tensors()
    return gguf_file(model_kvs(), infos, data, **kwargs)
