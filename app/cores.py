"""The machine's cores, lent by the parts of the process that compute on them.

A pure helper below every layer: the translation engine reads it before each pass, and the
speech recogniser and the voices, which sit above the engine's seam, lend through it, so
neither imports the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


class CoreLoans:
    """Cores another CPU-bound part of this process is computing on right now.

    llama.cpp runs each operation of a forward pass on a team of ``n_threads`` threads that
    meet at a barrier after it. When the speech recogniser (or a voice) takes one of the
    cores for a decode, one thread of the team waits for a time slice at every barrier
    while its partner spins or sleeps, and a pass costs several times more. So a part that
    computes on the CPU *lends* its cores for as long as it computes (``lent``), and the
    engine runs its next passes on the cores left (``threads_for``), then on all of them
    again; ggml splits an operation's rows between threads, so the logits are the same bit
    for bit. Measured on this project's 2-core machine (``livetrans bench speech
    --versus-no-core-loans``, docs/audio-in.md): with two audio speakers beside a text
    speaker, the text speaker's finals p50 3.1 s against 21.3 s without loans and the
    audio speakers' speech end to final p50 5.2 s against 12.7 s.

    One per process (``CORE_LOANS``): the cores are the machine's, whoever uses them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lent = 0

    @property
    def now(self) -> int:
        """Cores lent at this moment."""
        return self._lent

    @contextmanager
    def lent(self, cores: int) -> Iterator[None]:
        """Count ``cores`` as taken while the block runs (nested and concurrent loans add)."""
        cores = max(0, int(cores))
        with self._lock:
            self._lent += cores
        try:
            yield
        finally:
            with self._lock:
                self._lent -= cores

    def run(self, cores: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with ``cores`` lent (for an executor: ``submit(loans.run, 1, f, x)``)."""
        with self.lent(cores):
            return fn(*args)

    def threads_for(self, threads: int) -> int:
        """Threads the engine may use now out of its ``threads``: never fewer than one."""
        return max(1, threads - self._lent)


CORE_LOANS = CoreLoans()
