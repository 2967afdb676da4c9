"""Read a GGUF's vocabulary and write a copy that keeps only some tokens.

What changes between the two files, and nothing else:

- every ``tokenizer.ggml.*`` array with one entry per token (``tokens``, ``scores``,
  ``token_type``, and any other per-token array a converter wrote) keeps the kept entries;
- every ``tokenizer.ggml.*_token_id`` is renumbered (the kept ids keep their order, so a
  token's new id is its rank among the kept);
- every tensor with one row per token (``token_embd.weight``; ``output.weight`` where the
  model does not tie it) keeps the kept rows. Rows of a quantised tensor are whole blocks,
  so rows are copied byte for byte: nothing is re-quantised and kept tokens' logits are
  unchanged;
- ``livetrans.vocab_trim.*`` records the languages and, per new id, the original id and
  the original tokenizer's identity (what a tool needs to map anything stored as ids); a
  trimmed model trimmed again keeps pointing at the original, untrimmed vocabulary.

Only tokenizers whose vocabulary can be cut this way are accepted: ``llama`` (SentencePiece
pieces with scores, no merges list; Gemma, Llama 2, Mistral). A BPE tokenizer carries a
merges list whose every line names two tokens, and WordPiece and others have rules of their
own; cutting those is refused rather than guessed.

The output is written to a temporary file beside ``out`` and renamed into place only when
complete: a failure leaves no half-written model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.vocab_trim.gguf_check import UnreadableGGUFError, check_gguf_file
from app.vocab_trim.output import atomic_output, describe
from app.vocab_trim.selection import TokenTable

TRIMMABLE_TOKENIZERS = ("llama",)
_TOKENS = "tokenizer.ggml.tokens"
_MODEL = "tokenizer.ggml.model"
_SCORES = "tokenizer.ggml.scores"
_TYPES = "tokenizer.ggml.token_type"
_MERGES = "tokenizer.ggml.merges"
SOURCE_IDS_KEY = "livetrans.vocab_trim.source_ids"
# the tokenizer the source ids are ids of (``LlamaVocab.identity`` of the untrimmed model)
SOURCE_TOKENIZER_KEY = "livetrans.vocab_trim.source_tokenizer"
LANGS_KEY = "livetrans.vocab_trim.langs"  # app.loader reads it: the languages served


_INTEGER_TYPES = frozenset(range(6)) | {10, 11}  # GGUFValueType: UINT8..INT32, UINT64, INT64
_NUMBER_TYPES = _INTEGER_TYPES | {6, 12}  # and FLOAT32, FLOAT64
_STRING_TYPES = frozenset({8})
_BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


class TrimError(Exception):
    """The model cannot be trimmed (one sentence, for the command line)."""


def open_gguf(path: Path):  # noqa: ANN201 - gguf.GGUFReader
    """A read-only ``GGUFReader`` (memory-mapped: tensors are read only when copied).

    The header is walked first (``gguf_check``): ``GGUFReader`` trusts every count a
    damaged file claims, so without the walk a truncated file is a traceback and a huge
    claimed array costs gigabytes before anything fails."""
    import gguf

    try:
        check_gguf_file(path)
    except UnreadableGGUFError as exc:
        raise TrimError(str(exc)) from None
    except OSError as exc:
        raise TrimError(f"cannot read {path}: {describe(exc)}") from None
    try:
        return gguf.GGUFReader(path)
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, OSError) as exc:
        # what the walk does not foresee; the reader's own words, still one line
        raise TrimError(f"{path} could not be read as GGUF ({exc})") from None


def token_table(reader) -> TokenTable:  # noqa: ANN001 - gguf.GGUFReader
    """The per-token arrays of a trimmable tokenizer, or ``TrimError`` naming what is not."""
    model = _field_value(reader, _MODEL)
    if model is None or _TOKENS not in reader.fields:
        raise TrimError("the model has no tokenizer in its GGUF metadata; there is nothing "
                        "to trim")
    if model not in TRIMMABLE_TOKENIZERS or _MERGES in reader.fields:
        raise TrimError(f"the model's tokenizer type is '{model}'; only SentencePiece "
                        f"vocabularies ({', '.join(TRIMMABLE_TOKENIZERS)}: Gemma, Llama 2, "
                        "Mistral) can be trimmed safely")
    n = _array_length(reader, _TOKENS, _STRING_TYPES)
    if n == 0:
        raise TrimError(f"the model's {_TOKENS} array is empty")
    for key, types in ((_SCORES, _NUMBER_TYPES), (_TYPES, _INTEGER_TYPES)):
        if key not in reader.fields or _array_length(reader, key, types) != n:
            raise TrimError(f"the model's tokenizer lacks a complete {key} array")
    tokens = reader.fields[_TOKENS].contents()
    _require_byte_tokens(tokens)
    return TokenTable(tokens=tokens,
                      scores=np.asarray(reader.fields[_SCORES].contents(), dtype=np.float32),
                      types=np.asarray(reader.fields[_TYPES].contents(), dtype=np.int32))


def _require_byte_tokens(tokens: list[str]) -> None:
    """SentencePiece spells a character it has no token for in byte tokens (``<0xC3>``):
    llama.cpp looks them up by name and aborts the process when one is missing, and a
    trimmed vocabulary relies on them for all text outside the kept set."""
    present = set(tokens)
    missing = [name for name in _BYTE_TOKENS if name not in present]
    if missing:
        raise TrimError(f"the model's tokenizer lacks {len(missing)} of the 256 byte tokens "
                        f"(such as {missing[0]}) that SentencePiece falls back to; llama.cpp "
                        "cannot tokenize text with it")


def _array_length(reader, key: str, item_types: frozenset[int]) -> int:  # noqa: ANN001
    """The length of the metadata array ``key`` (``TrimError`` when it is something else
    or holds items of another type: a damaged file must not reach numpy as a traceback)."""
    import gguf

    field = reader.fields[key]
    if not field.types or field.types[0] != gguf.GGUFValueType.ARRAY:
        raise TrimError(f"the model's {key} is not an array")
    if len(field.data) and field.types[-1] not in item_types:
        raise TrimError(f"the model's {key} array holds {field.types[-1].name.lower()} "
                        "items, not the type llama.cpp reads there")
    return len(field.data)


def _field_value(reader, key: str):  # noqa: ANN001, ANN202
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def special_token_ids(reader, n_vocab: int) -> list[int]:  # noqa: ANN001 - gguf.GGUFReader
    """The ids the metadata names (``tokenizer.ggml.bos_token_id`` and the like): a trimmed
    model must keep them whatever their type. Each must be a whole number below
    ``n_vocab`` (else ``TrimError``: the selection indexes the vocabulary with them)."""
    return [_token_id(f, n_vocab) for f in reader.fields.values()
            if f.name.startswith("tokenizer.ggml.") and f.name.endswith("_token_id")]


def _token_id(field, n_vocab: int) -> int:  # noqa: ANN001 - gguf.ReaderField
    if len(field.types) != 1 or field.types[0] not in _INTEGER_TYPES:
        kind = field.types[0].name.lower() if field.types else "empty"
        raise TrimError(f"the model's {field.name} is of type {kind}, not a token id")
    value = int(field.contents())
    if not 0 <= value < n_vocab:
        raise TrimError(f"the model's {field.name} is {value}, not a token id of its "
                        f"{n_vocab}-token vocabulary")
    return value


def _per_token_rows(tensor, n_vocab: int) -> bool:  # noqa: ANN001
    """A tensor with one row per token (ggml's outermost dimension is the token)."""
    dims = [int(d) for d in tensor.shape]
    return len(dims) == 2 and dims[-1] == n_vocab


def write_trimmed(reader, keep: np.ndarray, out: Path, langs: list[str],  # noqa: ANN001
                  tokenizer: str) -> None:
    """Write ``reader``'s model with only the token ids ``keep`` (ascending) to ``out``;
    ``tokenizer`` is the identity of ``reader``'s tokenizer (``LlamaVocab.identity``).
    Written beside ``out`` and renamed into place (``output.atomic_output``): a failure,
    an interrupt included, leaves nothing behind; an ``OSError`` (a full disk) is a
    ``TrimError``."""
    table_size = len(reader.fields[_TOKENS].data)
    keep = np.asarray(keep, dtype=np.int64)
    if len(keep) == 0 or np.any(np.diff(keep) <= 0) or keep[-1] >= table_size:
        raise ValueError("keep must be ascending token ids of the model")
    rows = {t.name for t in reader.tensors if _per_token_rows(t, table_size)}
    if not rows:
        raise TrimError("the model has no tensor with one row per token; its vocabulary "
                        "cannot be cut")
    with atomic_output(out, lambda exc: TrimError(f"cannot write {out}: {describe(exc)}")
                       ) as tmp:
        _write(reader, tmp, keep, rows, langs, tokenizer)


def _write(reader, tmp: Path, keep: np.ndarray, rows: set[str],  # noqa: ANN001
           langs: list[str], tokenizer: str) -> None:
    """The whole trimmed model into ``tmp``: metadata cut and renumbered, provenance
    added, the per-token tensors' kept rows and every other tensor copied byte for
    byte."""
    import gguf

    writer = gguf.GGUFWriter(tmp, _field_value(reader, "general.architecture"),
                             endianess=reader.endianess)
    _copy_metadata(reader, writer, keep)
    earlier = reader.fields.get(SOURCE_IDS_KEY)
    source = np.asarray(earlier.contents())[keep] if earlier is not None else keep
    writer.add_array(SOURCE_IDS_KEY, [int(i) for i in source])
    writer.add_string(SOURCE_TOKENIZER_KEY,
                      _field_value(reader, SOURCE_TOKENIZER_KEY) or tokenizer)
    writer.add_string(LANGS_KEY, ",".join(langs))
    tensors = []
    for t in reader.tensors:
        data = t.data[keep] if t.name in rows else t.data
        writer.add_tensor_info(t.name, data.shape, data.dtype, data.nbytes, t.tensor_type)
        tensors.append(data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in tensors:
        writer.write_tensor_data(np.ascontiguousarray(data),
                                 tensor_endianess=reader.endianess)
    writer.close()


def _copy_metadata(reader, writer, keep: np.ndarray) -> None:  # noqa: ANN001
    import gguf

    table_size = len(reader.fields[_TOKENS].data)
    new_id = np.full(table_size, -1, dtype=np.int64)
    new_id[keep] = np.arange(len(keep))
    for f in reader.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue  # the writer writes its own
        if f.name.startswith("livetrans.vocab_trim."):
            continue  # a trimmed model trimmed again records its new provenance
        kind = f.types[0]
        sub = f.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = f.contents()
        if (kind == gguf.GGUFValueType.ARRAY and f.name.startswith("tokenizer.ggml.")
                and len(f.data) == table_size):
            value = [value[i] for i in keep]
        elif f.name.startswith("tokenizer.ggml.") and f.name.endswith("_token_id"):
            if not 0 <= int(value) < table_size or new_id[int(value)] < 0:
                raise TrimError(f"the special token {f.name} = {value} is not kept")
            value = int(new_id[int(value)])
        elif f.name.endswith(".vocab_size"):
            value = len(keep)
        writer.add_key_value(f.name, value, kind, sub_type=sub)
