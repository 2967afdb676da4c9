"""A thin, owned wrapper over llama-cpp-python's low-level C API.

Why not ``llama_cpp.Llama``: speculative verification needs logits at chosen batch
positions only (each logits row of Gemma's 262k vocabulary costs about 2.6 ms on this CPU,
so ``logits_all=True`` is ruinous), zero-copy access to those rows, and KV truncation at an
arbitrary position. The high-level class hides all three. This module exposes exactly
those primitives and nothing about prompts, drafts or HTTP.

The object is not thread-safe (neither is llama.cpp's context): the engine worker is the
only caller.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.cores import CORE_LOANS, CoreLoans
from app.engine.llama_build import amx_compiled
from app.engine.llama_lib import import_llama, silence_llama_logs
from app.engine.vocab import LlamaVocab

log = logging.getLogger("livetrans.runtime")


class DecodeError(RuntimeError):
    """``llama_decode`` failed (context full, invalid batch, or aborted)."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How to load the model; every field maps to a ``livetrans serve`` option."""

    model_path: Path
    n_ctx: int = 4096
    n_threads: int | None = None
    n_gpu_layers: int = 0
    n_ubatch: int | None = None  # None: CPU_UBATCH on the CPU, GPU_UBATCH with GPU layers
    verbose: bool = False
    # Sequences (llama.cpp's slots) sharing one unified KV cache; each may grow to n_ctx.
    n_seq: int = 1
    # On the CPU, leave the cores others in the process compute on (``CoreLoans``).
    core_loans: bool = True


# Rows llama.cpp computes at once (its physical batch, ``n_ubatch``). On the CPU, under 64:
# from 64 query rows on (GGML_FA_TILE_Q) ggml's CPU flash attention takes a tiled kernel
# that skips a block of KV cells only when every query row of the tile masks all of it.
# With several sequences in one unified cache and one batch, hardly a block is skipped, so
# every row attends over every sequence's cells. Measured on this project's 2-core CPU
# (Gemma 3 270M Q4_K_M, 8 sequences of 400 cached tokens, rows spread over all 8): a
# 64-row pass cost 5.2 ms a row at 512 and 3.3 at 48 (trimmed file; 6.6 and 4.8 full),
# while 8 to 48 rows and one sequence's long prefill cost the same either way. A GPU
# keeps llama.cpp's large default: its kernels are another matter.
CPU_UBATCH = 48
GPU_UBATCH = 512


def ubatch_for(config: RuntimeConfig) -> int:
    """The physical batch for ``config``: its own, or the default for where it runs."""
    if config.n_ubatch is not None:
        return config.n_ubatch
    return GPU_UBATCH if config.n_gpu_layers != 0 else CPU_UBATCH


class LlamaRuntime:
    """One model, one context with ``n_seq`` sequences in a unified KV cache, one batch.

    The cache holds ``n_ctx * n_seq`` cells, so every sequence can reach the full context
    length at once; with a unified cache a prefix copied from one sequence to another
    (``seq_copy``) shares cells instead of duplicating them.
    """

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self.ll = ll = import_llama()
        self._install_logger(config.verbose)
        ll.llama_backend_init()
        if amx_compiled(ll.llama_print_system_info().decode("utf-8", "replace")):
            log.warning("this llama-cpp-python build has llama.cpp's AMX kernels, which "
                        "crash on Q4_K models (llama.cpp issue 20824); rebuild it with "
                        "'make setup' (it builds without them)")

        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = config.n_gpu_layers
        self.model = ll.llama_model_load_from_file(str(config.model_path).encode(), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {config.model_path}")
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.tok = LlamaVocab(ll, self.vocab)
        self.tok.model_name = config.model_path.name
        self.n_vocab = self.tok.n_vocab

        threads = config.n_threads or max(1, os.cpu_count() or 1)
        cparams = ll.llama_context_default_params()
        self.n_seq = max(1, config.n_seq)
        cparams.n_ctx = config.n_ctx * self.n_seq
        # A step may carry a whole prompt suffix plus a draft in ONE llama_decode: the logical
        # batch is one full context, llama.cpp splits it into physical ubatches itself.
        cparams.n_batch = config.n_ctx
        cparams.n_ubatch = min(ubatch_for(config), config.n_ctx)
        cparams.n_seq_max = self.n_seq
        cparams.kv_unified = True
        # Verification reads logits at many positions of one sequence; this llama.cpp's
        # default allows one output per sequence and then returns rows for the wrong tokens.
        cparams.n_outputs_max = config.n_ctx
        cparams.n_outputs_max_per_seq = config.n_ctx
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        # On the CPU, a step runs on the cores no other part of the process is computing on
        # (``CoreLoans``); with GPU layers the threads barely matter and are left alone.
        self.threads = threads
        self.threads_now = threads
        self.loans: CoreLoans | None = (CORE_LOANS if config.core_loans
                                        and config.n_gpu_layers == 0 else None)
        self.steps_on_fewer_threads = 0
        # Gemma 3 uses sliding-window attention; without the full-size SWA cache, removing
        # KV entries and re-decoding silently gives wrong logits past ~1024 tokens.
        cparams.swa_full = True
        cparams.no_perf = True
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context")
        # The per-sequence limit: positions a single sequence may reach.
        self.n_ctx = int(ll.llama_n_ctx(self.ctx)) // self.n_seq
        self.memory = ll.llama_get_memory(self.ctx)
        self._batch_capacity = config.n_ctx
        self._batch = ll.llama_batch_init(self._batch_capacity, 0, 1)
        self._closed = False

    def _install_logger(self, verbose: bool) -> None:
        silence_llama_logs(self.ll, verbose)

    # -- metadata --------------------------------------------------------------------------
    def chat_template(self) -> str | None:
        raw = self.ll.llama_model_chat_template(self.model, None)
        return raw.decode("utf-8", "replace") if raw else None

    def metadata(self, key: str) -> str | None:
        """A GGUF metadata value as text (None when the file has no such key)."""
        size = 4096
        buf = ctypes.create_string_buffer(size)
        n = self.ll.llama_model_meta_val_str(self.model, key.encode(), buf, size)
        if n < 0:
            return None
        return buf.value.decode("utf-8", "replace")

    # -- tokens ----------------------------------------------------------------------------
    def tokenize(self, text: str, add_bos: bool = False, special: bool = False) -> list[int]:
        return self.tok.tokenize(text, add_bos, special)

    def token_bytes(self, token: int) -> bytes:
        return self.tok.token_bytes(token)

    def detokenize(self, tokens: list[int]) -> str:
        return self.tok.detokenize(tokens)

    def is_eog(self, token: int) -> bool:
        return self.tok.is_eog(token)

    @property
    def bos_token(self) -> int:
        return int(self.ll.llama_vocab_bos(self.vocab))

    @property
    def eos_token(self) -> int:
        return int(self.ll.llama_vocab_eos(self.vocab))

    # -- forward pass and KV cache ---------------------------------------------------------
    def decode(self, tokens: list[int], start_pos: int, logits_at: list[int],
               seq: int = 0) -> None:
        """Run ONE ``llama_decode`` over ``tokens`` of sequence ``seq`` at ``start_pos...``.

        ``logits_at`` lists batch indices whose logits are wanted; read them afterwards with
        ``logits_row(index)`` before the next decode overwrites them.
        """
        if start_pos + len(tokens) > self.n_ctx:
            raise DecodeError(
                f"context full: {start_pos + len(tokens)} tokens needed, "
                f"context holds {self.n_ctx}")
        want = set(logits_at)
        self.decode_rows([(tok, start_pos + i, seq, i in want)
                          for i, tok in enumerate(tokens)])

    def decode_rows(self, rows: list[tuple[int, int, int, bool]]) -> None:
        """ONE ``llama_decode`` over rows of (token, position, sequence, wants logits).

        Rows of several sequences share the forward pass; the logits of row ``i`` (when
        wanted) are read with ``logits_row(i)`` until the next decode.
        """
        n = len(rows)
        if n == 0:
            raise ValueError("empty batch")
        if n > self._batch_capacity:
            raise DecodeError(f"batch of {n} rows; at most {self._batch_capacity} fit")
        batch = self._batch
        for i, (tok, pos, seq, logits) in enumerate(rows):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = logits
        batch.n_tokens = n
        self._take_threads()
        rc = self.ll.llama_decode(self.ctx, batch)
        if rc != 0:
            raise DecodeError(f"llama_decode returned {rc}")

    def _take_threads(self) -> None:
        """Run the next pass on the threads the loans leave (``llama_set_n_threads`` only
        when that number changes: it takes effect at the next ``llama_decode``)."""
        if self.loans is None:
            return
        want = self.loans.threads_for(self.threads)
        if want != self.threads_now:
            self.ll.llama_set_n_threads(self.ctx, want, want)
            self.threads_now = want
        if want < self.threads:
            self.steps_on_fewer_threads += 1

    def logits_row(self, index: int) -> np.ndarray:
        """A zero-copy float32 view of the logits at batch ``index`` of the last decode."""
        ptr = self.ll.llama_get_logits_ith(self.ctx, index)
        if not ptr:
            raise DecodeError(f"no logits at batch index {index}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def truncate(self, pos: int, seq: int = 0) -> None:
        """Drop every KV entry of sequence ``seq`` at position >= ``pos``."""
        if not self.ll.llama_memory_seq_rm(self.memory, seq, pos, -1):
            raise DecodeError(f"could not truncate the KV cache at {pos}")

    def seq_copy(self, src: int, dst: int, n: int) -> None:
        """Make positions ``[0, n)`` of ``src`` part of ``dst`` too (shared cells, no compute).

        ``dst`` is emptied first: a prefix copy replaces whatever it held.
        """
        self.truncate(0, dst)
        if n > 0:
            self.ll.llama_memory_seq_cp(self.memory, src, dst, 0, n)

    def clear(self) -> None:
        self.ll.llama_memory_clear(self.memory, True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.ll.llama_batch_free(self._batch)
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
