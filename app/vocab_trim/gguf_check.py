"""Refuse a damaged GGUF file before anything parses it, in one sentence.

gguf's ``GGUFReader`` trusts the header it reads: a truncated file fails deep inside numpy
(an ``IndexError``, a traceback), and a header that claims a billion-entry array makes it
build a billion small numpy views, one per entry, whether or not the bytes exist (past the
end of a memory map a read is simply empty), which takes gigabytes and minutes. This module
walks the same structure first, with no more than a cursor and the file's size: every count
and length the header claims is checked against the bytes that remain *before* anything is
looped over or allocated, so a damaged file of any size is refused in a fraction of a
second, naming what is wrong and where.

What is checked, in the order of the file (the GGUF format as ``ggml/src/gguf.cpp`` reads
it): the magic, the version (2 or 3, what ``GGUFReader`` reads), the tensor and key-value
counts, every key (a UTF-8 name, no duplicate, a known value type; strings and arrays fit in
the file, no array of arrays), every tensor description (a UTF-8 name, at most
``GGML_MAX_DIMS`` dimensions, a known type whose block size divides the row, an offset
aligned as llama.cpp requires), ``general.alignment`` (a power-of-two ``uint32``) and that
every tensor's data lies inside the file.

Beyond damage, one limit: ``GGUFReader`` builds Python objects for every key, tensor and
array entry, some 900 bytes each (measured: 720 MB for Gemma 3's 0.79 million entries, its
262,144-token vocabulary's three arrays), so a file with more than ``MAX_ENTRIES`` of them
in all is refused rather than read: about 2 GB at the limit, which allows a SentencePiece
vocabulary of some 690,000 tokens.
"""

from __future__ import annotations

import mmap
import stat
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"GGUF"
READABLE_VERSIONS = (2, 3)
MAX_ENTRIES = 1 << 21  # keys + tensors + array items; see the module docstring
ALIGNMENT_KEY = "general.alignment"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

# GGUF value types (gguf_type): fixed sizes in bytes; STRING and ARRAY have their own layout
STRING, ARRAY, UINT32 = 8, 9, 4
SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
HEADER_BYTES = 4 + 4 + 8 + 8  # magic, version, tensor count, key count
MIN_KV_BYTES = 8 + 4 + 1  # key length, value type, the smallest value
MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, dimension count, type, offset


class UnreadableGGUFError(Exception):
    """The file cannot be read as a GGUF model (one sentence, for the command line)."""


def damaged(detail: str) -> UnreadableGGUFError:
    return UnreadableGGUFError(f"the file is damaged or truncated: {detail}")


@dataclass
class TensorInfo:
    """Where one tensor's data lies, relative to the start of the data section."""

    name: str
    offset: int
    n_bytes: int


@dataclass
class _Cursor:
    """Reads the header front to back; every read is checked against the file's size."""

    buf: mmap.mmap
    size: int
    order: str  # struct byte order: '<' or '>'
    pos: int = 0
    entries: int = 0

    def __post_init__(self) -> None:
        self._u32 = struct.Struct(f"{self.order}I")
        self._u64 = struct.Struct(f"{self.order}Q")

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def take(self, n: int, what: Callable[[], str]) -> int:
        """Claim the next ``n`` bytes (they must be in the file); their start."""
        if n > self.remaining:
            raise damaged(f"{what()} at byte {self.pos} needs {n:,} bytes but only "
                          f"{self.remaining:,} remain (the file is {self.size:,} bytes)")
        start = self.pos
        self.pos += n
        return start

    def uint(self, size: int, what: Callable[[], str]) -> int:
        start = self.take(size, what)
        return (self._u32 if size == 4 else self._u64).unpack_from(self.buf, start)[0]

    def text(self, what: Callable[[], str]) -> str:
        """A GGUF string (uint64 length, then UTF-8 bytes)."""
        length = self.uint(8, lambda: f"the length of {what()}")
        start = self.take(length, what)
        try:
            return self.buf[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise damaged(f"{what()} at byte {start} is not UTF-8 text") from None

    def count(self, n: int, min_bytes: int, what: Callable[[], str]) -> None:
        """``n`` more entries, each at least ``min_bytes`` long: refused here, before any
        loop over them, when the rest of the file cannot hold them or they exceed the
        limit on entries."""
        if n * min_bytes > self.remaining:
            raise damaged(f"{what()} claims {n:,} entries at byte {self.pos}, more than the "
                          f"{self.remaining:,} bytes left in the file can hold")
        self.entries += n
        if self.entries > MAX_ENTRIES:
            raise UnreadableGGUFError(
                f"the file's metadata holds more than {MAX_ENTRIES:,} keys, tensors and array "
                "entries in all (the last: "
                f"{what()}), more than this tool reads; no trimmable vocabulary is that large")


def check_gguf_file(path: Path) -> list[TensorInfo]:
    """Walk ``path``'s header (module docstring); ``UnreadableGGUFError`` at the first
    problem. The tensors' places, for a caller that wants them."""
    with _header(path) as cur:
        return _check(cur)


def string_key(path: Path, wanted: str) -> str | None:
    """The value of one string key of ``path``'s metadata (None: absent, or no string),
    read by walking the keys as ``check_gguf_file`` does: a fraction of a second, where
    ``GGUFReader`` takes seconds on a large vocabulary (``serve --langs`` asks this of the
    model on every start). ``UnreadableGGUFError`` for a damaged header."""
    with _header(path) as cur:
        n_kv = _counts(cur)[1]
        for i in range(n_kv):
            key = cur.text(lambda i=i: f"the name of key {i}")
            vtype = cur.uint(4, lambda key=key: f"the type of key '{key}'")
            if key == wanted:
                return cur.text(lambda key=key: f"key '{key}'") if vtype == STRING else None
            _value(cur, vtype, lambda key=key: f"key '{key}'")
    return None


@contextmanager
def _header(path: Path) -> Iterator[_Cursor]:
    """A cursor at the start of ``path`` once it is a regular file with a GGUF magic and
    a whole header."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise UnreadableGGUFError(f"{path} is not a regular file")
    with path.open("rb") as f:
        head = f.read(HEADER_BYTES)
        if head[:len(MAGIC)] != MAGIC[:len(head)]:
            raise _not_gguf()
        if not head:
            raise UnreadableGGUFError("the file is empty")
        if len(head) < HEADER_BYTES:
            raise damaged(f"it is {len(head)} bytes, shorter than a GGUF header "
                          f"({HEADER_BYTES} bytes)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            yield _Cursor(buf, len(buf), _byte_order(buf))


def _not_gguf() -> UnreadableGGUFError:
    return UnreadableGGUFError("the file is not GGUF (it does not start with 'GGUF')")


def _byte_order(buf: mmap.mmap) -> str:
    """The file's byte order, found as ``GGUFReader`` finds it: a version whose low 16 bits
    are zero was written for the other byte order."""
    native = "<" if sys.byteorder == "little" else ">"
    version = struct.unpack_from(f"{native}I", buf, len(MAGIC))[0]
    if version & 0xFFFF == 0:
        return ">" if native == "<" else "<"
    return native


def _counts(cur: _Cursor) -> tuple[int, int]:
    """The magic and version read; the tensor and key counts, checked."""
    cur.take(len(MAGIC), lambda: "the magic")
    version = cur.uint(4, lambda: "the version")
    if version not in READABLE_VERSIONS:
        raise UnreadableGGUFError(
            f"the file is GGUF version {version}; this tool reads versions "
            f"{' and '.join(map(str, READABLE_VERSIONS))}")
    n_tensors = cur.uint(8, lambda: "the tensor count")
    n_kv = cur.uint(8, lambda: "the key count")
    cur.count(n_kv, MIN_KV_BYTES, lambda: "the key count")
    cur.count(n_tensors, MIN_TENSOR_INFO_BYTES, lambda: "the tensor count")
    return n_tensors, n_kv


def _check(cur: _Cursor) -> list[TensorInfo]:
    n_tensors, n_kv = _counts(cur)
    alignment = _check_keys(cur, n_kv)
    tensors = [_tensor_info(cur, i) for i in range(n_tensors)]
    _check_tensor_names(tensors)
    _check_tensor_data(cur, tensors, alignment)
    return tensors


def _check_keys(cur: _Cursor, n_kv: int) -> int:
    """Every key-value pair; the data alignment (``general.alignment`` or the default)."""
    seen: set[str] = set()
    alignment = DEFAULT_ALIGNMENT
    for i in range(n_kv):
        key = cur.text(lambda i=i: f"the name of key {i}")
        if key in seen:
            raise damaged(f"the key '{key}' appears twice")
        seen.add(key)
        vtype = cur.uint(4, lambda key=key: f"the type of key '{key}'")
        if key == ALIGNMENT_KEY:
            alignment = _alignment(cur, vtype)
        else:
            _value(cur, vtype, lambda key=key: f"key '{key}'")
    return alignment


def _alignment(cur: _Cursor, vtype: int) -> int:
    if vtype != UINT32:
        raise damaged(f"'{ALIGNMENT_KEY}' has value type {vtype}, not uint32")
    value = cur.uint(4, lambda: f"'{ALIGNMENT_KEY}'")
    if value == 0 or value & (value - 1):
        raise damaged(f"'{ALIGNMENT_KEY}' is {value}, not a power of two")
    return value


def _value(cur: _Cursor, vtype: int, what: Callable[[], str]) -> None:
    size = SCALAR_SIZES.get(vtype)
    if size is not None:
        cur.take(size, what)
    elif vtype == STRING:
        cur.text(what)
    elif vtype == ARRAY:
        _array(cur, what)
    else:
        raise damaged(f"{what()} has value type {vtype}, which GGUF does not define")


def _array(cur: _Cursor, what: Callable[[], str]) -> None:
    """An array's item type, length and items: the length is checked against the bytes
    left (each item takes at least its fixed size, a string at least its length field)
    before the items are walked."""
    item_type = cur.uint(4, lambda: f"the item type of {what()}")
    length = cur.uint(8, lambda: f"the length of {what()}")
    size = SCALAR_SIZES.get(item_type)
    if size is not None:
        cur.count(length, size, what)
        cur.take(length * size, what)
    elif item_type == STRING:
        cur.count(length, 8, what)
        for i in range(length):
            cur.text(lambda i=i: f"item {i} of {what()}")
    elif item_type == ARRAY:
        raise damaged(f"{what()} is an array of arrays, which GGUF readers refuse")
    else:
        raise damaged(f"{what()} has items of type {item_type}, which GGUF does not define")


def _tensor_info(cur: _Cursor, index: int) -> TensorInfo:
    """One tensor description: name, dimensions, type, offset; its size in bytes."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    name = cur.text(lambda: f"the name of tensor {index}")
    n_dims = cur.uint(4, lambda: f"the dimension count of tensor '{name}'")
    if n_dims > MAX_DIMS:
        raise damaged(f"tensor '{name}' claims {n_dims:,} dimensions (at most {MAX_DIMS})")
    dims = [cur.uint(8, lambda: f"the dimensions of tensor '{name}'") for _ in range(n_dims)]
    raw_type = cur.uint(4, lambda: f"the type of tensor '{name}'")
    offset = cur.uint(8, lambda: f"the data offset of tensor '{name}'")
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(raw_type)]
    except (ValueError, KeyError):
        raise damaged(f"tensor '{name}' has type {raw_type}, which this gguf library does "
                      "not know") from None
    row = dims[0] if dims else 1
    if row % block:
        raise damaged(f"tensor '{name}' has rows of {row} values, not a whole number of "
                      f"its type's {block}-value blocks")
    n_elements = 1
    for d in dims:
        n_elements *= d
    return TensorInfo(name, offset, n_elements // block * type_size)


def _check_tensor_names(tensors: list[TensorInfo]) -> None:
    seen: set[str] = set()
    for t in tensors:
        if t.name in seen:
            raise damaged(f"two tensors are named '{t.name}'")
        seen.add(t.name)


def _check_tensor_data(cur: _Cursor, tensors: list[TensorInfo], alignment: int) -> None:
    """Every tensor's bytes lie inside the file (the data section starts at the first
    multiple of ``alignment`` after the header; offsets are relative to it)."""
    start = -(-cur.pos // alignment) * alignment
    for t in tensors:
        if t.offset % alignment:
            raise damaged(f"tensor '{t.name}' starts at offset {t.offset:,}, not a multiple "
                          f"of the alignment {alignment}")
        end = start + t.offset + t.n_bytes
        if end > cur.size:
            raise damaged(f"tensor '{t.name}' ({t.n_bytes:,} bytes) ends at byte {end:,} but "
                          f"the file ends at byte {cur.size:,}")
