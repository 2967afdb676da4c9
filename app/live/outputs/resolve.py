"""Host name resolution for pushes, on a few threads of its own, each call bounded in time.

``loop.getaddrinfo`` runs the resolver on asyncio's default executor, which the rest of
the server shares (``asyncio.to_thread``: the engine's shutdown drain, file work). A push
host whose DNS hangs would pin its threads: a timeout around the call frees the push, not
the thread, so a few hanging lookups would stall everything else that uses the executor.

Here each lookup runs on a daemon thread of its own, at most ``threads`` at once across
the process. A lookup that does not answer within its timeout fails that push attempt (a
``ResolveError``, which ``net`` turns into a connect error, retried like any network
error); its thread keeps its slot until the resolver returns. While every slot is held by
a lookup that hangs, further lookups fail at once instead of queueing behind them. The
threads are daemons, so a hanging resolver never holds up the process's exit either
(a ``ThreadPoolExecutor``'s threads are joined at exit).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
from collections.abc import Callable
from typing import Any

from app.supervision import reraise_lost_cancel

# (host, port) -> getaddrinfo's answer: the real ``socket.getaddrinfo`` in production, a
# stand-in in tests (one that hangs, one that answers a fixed address)
GetAddrInfo = Callable[[str, int], list[tuple[Any, ...]]]

RESOLVER_THREADS = 4  # lookups under way at once, process-wide
RESOLVE_TIMEOUT_S = 5.0


class ResolveError(OSError):
    """The name did not resolve: an error from the resolver, a timeout, or no free slot."""


def system_getaddrinfo(host: str, port: int) -> list[tuple[Any, ...]]:
    """The system resolver, for TCP."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class Resolver:
    """Bounded lookups on daemon threads (see the module doc)."""

    def __init__(self, getaddrinfo: GetAddrInfo = system_getaddrinfo,
                 threads: int = RESOLVER_THREADS,
                 timeout_s: float = RESOLVE_TIMEOUT_S) -> None:
        self.getaddrinfo = getaddrinfo
        self.threads = threads
        self.timeout_s = timeout_s
        self.busy = 0  # lookups whose thread has not returned (a hung one included)
        self.lock = threading.Lock()

    async def resolve(self, host: str, port: int, timeout_s: float | None = None) -> list[str]:
        """``host``'s addresses, in the resolver's order, without repeats; raises
        ``ResolveError`` when it fails, times out (at most ``timeout_s`` and this
        resolver's own bound) or every thread is taken."""
        limit = min(timeout_s or self.timeout_s, self.timeout_s)
        with self.lock:
            if self.busy >= self.threads:
                raise ResolveError("every resolver thread is waiting for an answer")
            self.busy += 1
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[tuple[Any, ...]]] = loop.create_future()
        try:
            threading.Thread(target=self._lookup, args=(loop, answer, host, port),
                             name="livetrans-push-dns", daemon=True).start()
        except RuntimeError as exc:  # no thread to be had: this attempt fails, retried
            self._release()
            raise ResolveError("cannot start a resolver thread") from exc
        try:
            async with asyncio.timeout(limit):
                infos = await answer
        except TimeoutError:
            reraise_lost_cancel()  # a cancel that met the timeout is still a cancel
            raise ResolveError(f"no answer within {limit:g} s") from None
        found: list[str] = []
        for info in infos:
            address = str(info[4][0])
            if address not in found:
                found.append(address)
        return found

    def _lookup(self, loop: asyncio.AbstractEventLoop,
                answer: asyncio.Future[list[tuple[Any, ...]]], host: str, port: int) -> None:
        """On the lookup's own thread: ask, free the slot, hand the answer to the loop (if
        anyone still waits)."""
        try:
            outcome = functools.partial(_settle, answer, infos=self.getaddrinfo(host, port))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting push
            outcome = functools.partial(_settle, answer, error=exc)
        finally:
            self._release()
        try:
            loop.call_soon_threadsafe(outcome)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _release(self) -> None:
        with self.lock:
            self.busy -= 1


def _settle(answer: asyncio.Future[list[tuple[Any, ...]]],
            infos: list[tuple[Any, ...]] | None = None,
            error: Exception | None = None) -> None:
    if answer.done():  # the push stopped waiting (timed out or cancelled)
        return
    if error is not None:
        answer.set_exception(ResolveError(f"the resolver failed ({type(error).__name__})"))
    else:
        answer.set_result(infos or [])


_shared: Resolver | None = None


def shared_resolver() -> Resolver:
    """The process's resolver for pushes: its thread bound holds across all talks."""
    global _shared
    if _shared is None:
        _shared = Resolver()
    return _shared
