"""Connections for pushes: resolve the host, check every address, connect to a checked one.

Checking a URL's host name at ``start`` is not enough: the name may resolve to a private
address (or change to one later: DNS rebinding). So the HTTP client's network backend
resolves the name itself, keeps only the addresses the host policy allows
(``HostPolicy.address_allowed``) and connects to one of those: the address checked is the
address connected to. TLS still verifies the certificate against the host name (httpcore
starts TLS with the URL's host, not the address). Redirects are never followed
(``delivery``), and no proxy from the environment is used. Names are resolved on the
pushes' own few threads, each lookup bounded in time (``resolve``): a push host with slow
DNS holds up nothing else that runs on threads.

``httpx`` is imported here and in ``delivery`` only: the server's core dependencies need
not carry it for a server without pushes.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from app.live.outputs.allow import HostPolicy, as_address
from app.live.outputs.resolve import ResolveError, Resolver, shared_resolver


class AddressNotAllowed(httpcore.ConnectError):
    """The host resolved only to addresses the operator does not allow: never retried."""


def refused_address(exc: BaseException) -> bool:
    """Was this request's failure (an httpx error) the host policy's refusal?"""
    seen: BaseException | None = exc
    for _ in range(4):  # httpx wraps httpcore's exception as its cause
        if seen is None:
            return False
        if isinstance(seen, AddressNotAllowed):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, with name resolution and the host policy in front."""

    def __init__(self, policy: HostPolicy, inner: httpcore.AsyncNetworkBackend | None = None,
                 resolver: Resolver | None = None) -> None:
        self.policy = policy
        self.inner = inner if inner is not None else httpcore.AnyIOBackend()
        # not asyncio's default executor: a hanging lookup would pin the threads the rest
        # of the server uses (``resolve``)
        self.resolver = resolver if resolver is not None else shared_resolver()

    async def resolve(self, host: str, port: int, timeout: float | None) -> list[str]:
        """Every address of ``host`` (an address resolves to itself), in the resolver's
        order, without repeats. A lookup that fails, hangs past its bound or finds the
        resolver's threads all taken is a connect error: the attempt is retried."""
        literal = as_address(host)
        if literal is not None:
            return [str(literal)]
        try:
            return await self.resolver.resolve(host, port, timeout)
        except ResolveError as exc:
            raise httpcore.ConnectError(f"cannot resolve the host: {exc}") from None

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        addresses = await self.resolve(host, port, timeout)
        allowed = [a for a in addresses
                   if (addr := as_address(a)) is not None
                   and self.policy.address_allowed(host, addr)]
        if not allowed:
            raise AddressNotAllowed("the host resolves to no address this server allows "
                                    "(private or loopback addresses need "
                                    "--output-allow-host naming them)")
        error: Exception | None = None
        for address in allowed:
            try:
                return await self.inner.connect_tcp(address, port, timeout=timeout,
                                                    local_address=local_address,
                                                    socket_options=socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        raise AddressNotAllowed("pushes do not use Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context (the CA bundle loads once, not on the event loop at every talk's
    start); certificates are verified against the URL's host name."""
    return httpx.create_ssl_context(trust_env=False)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a ``GuardedBackend`` pool: no proxies from the environment,
    no retries of its own (``delivery`` retries), HTTP/1.1."""

    def __init__(self, policy: HostPolicy, max_connections: int = 8,
                 resolver: Resolver | None = None) -> None:
        super().__init__(verify=ssl_context(), trust_env=False, retries=0)
        # httpx builds its httpcore pool without a way to pass a network backend: replace
        # it with one that has ours (same settings as httpx's defaults otherwise)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context(),
            max_connections=max_connections, max_keepalive_connections=max_connections,
            keepalive_expiry=5.0, http1=True, http2=False, retries=0,
            network_backend=GuardedBackend(policy, resolver=resolver))
