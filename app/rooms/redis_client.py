"""How livetrans talks to Redis: one place for addresses, clients and what a failure means.

Two kinds of address (``serve --room-bus``):

- ``redis://[user:pass@]host:port/db`` (or ``rediss://``, ``unix://``): one Redis;
- ``redis-sentinel://[user:pass@]host:port[,host:port...]/SERVICE[/db]``: the primary of
  ``SERVICE`` as Redis Sentinel names it; after a failover the clients find the new
  primary themselves (redis-py's Sentinel support), so a failover costs seconds.

What a failure means (``unavailable``): a lost or refused connection, a timeout, *and* the
error replies a healthy-looking Redis gives while it cannot take writes (``OOM`` at
``maxmemory``, ``MISCONF`` on a full disk, ``READONLY`` after a failover, ``LOADING`` after a
restart, ``BUSY`` under a long script, ``NOPERM`` while an ACL is being fixed, ``MASTERDOWN``,
``NOREPLICAS``, ``TRYAGAIN``, ``CLUSTERDOWN``). All of these pass: a write that got one is
kept and made again later, never skipped. Any other error reply (a wrong type, bad syntax)
will never succeed and is the caller's to log.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff

T = TypeVar("T")
log = logging.getLogger("livetrans.redis")

SOCKET_TIMEOUT_S = 5.0
REPLICATION_WAIT_MS = 500  # with Sentinel: a kept write waits for a replica's copy
REPLICATION_PATIENCE_S = 30.0  # ... made again this long while none confirms it
CONNECT_TIMEOUT_S = 2.0
POOL_WAIT_S = 10.0  # a command waits this long for a free pooled connection

# error replies that say "not now" rather than "never": the codes Redis puts first
_TRANSIENT_CODES = ("OOM", "MISCONF", "READONLY", "LOADING", "BUSY", "NOPERM", "MASTERDOWN",
                    "NOREPLICAS", "TRYAGAIN", "CLUSTERDOWN", "NOSCRIPT")
# a script's error names the code inside its message ("... OOM command not allowed ...")
_TRANSIENT_RE = re.compile(r"(?:^|[\s:-])(" + "|".join(_TRANSIENT_CODES) + r")\b")
_TRANSIENT_CLASSES: tuple[type[BaseException], ...] = (
    rex.ConnectionError, rex.TimeoutError, OSError, rex.OutOfMemoryError, rex.ReadOnlyError,
    rex.NoPermissionError, rex.BusyLoadingError, rex.TryAgainError, rex.MasterDownError,
    rex.ClusterDownError)
_OOM_TEXT = "command not allowed when used memory"
# an ACL being fixed: a script's command refused is worded without the NOPERM code
_NOPERM_TEXT = ("can't run this command or subcommand", "has no permissions to run")
# a primary demoted by a failover answers WAIT (and writes) as a replica: not now, elsewhere
_DEMOTED_TEXT = ("cannot be used with replica", "read only replica")


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means "Redis cannot do this now; try again" (see the module doc)."""
    if isinstance(exc, _TRANSIENT_CLASSES):
        return True
    if isinstance(exc, rex.ResponseError):
        text = str(exc)
        return (_OOM_TEXT in text or any(t in text for t in _DEMOTED_TEXT + _NOPERM_TEXT)
                or _TRANSIENT_RE.search(text[:300]) is not None)
    return False


async def guarded(op: Callable[[], Awaitable[T]], what: str,
                  error: Callable[[str], Exception]) -> T:
    """``op()``, with a Redis that cannot do it now (``unavailable``) raised as
    ``error(message)``: a store's own "not now" (its callers retry, or answer 503); any
    other failure is a bug and raised as it is."""
    try:
        return await op()
    except Exception as exc:
        if not unavailable(exc):
            raise
        raise error(f"{what}: {describe(exc)}") from None


def describe(exc: BaseException) -> str:
    """One line about a Redis failure, for a log or an error message (no traceback)."""
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def redacted(url: str) -> str:
    """The URL without a password, for messages and logs."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return scheme + sep + rest


class BlockingSentinelPool(SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """Sentinel's pool (finds the primary, follows a failover) that waits for a free
    connection as ``BlockingConnectionPool`` does."""


class BadRedisURL(ValueError):
    """The address is not one livetrans understands (a newcomer's typo): one line."""


@dataclass(frozen=True)
class SentinelAddress:
    hosts: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None


SENTINEL_SCHEME = "redis-sentinel"


def parse_sentinel(url: str) -> SentinelAddress:
    """``redis-sentinel://[user:pass@]h:p[,h:p...]/SERVICE[/db]`` as its parts."""
    rest = url.split("://", 1)[1]
    creds, _, rest = rest.rpartition("@")
    username = password = None
    if creds:
        user, _, pw = creds.partition(":")
        username, password = unquote(user) or None, unquote(pw) or None
    where, _, path = rest.partition("/")
    parts = [p for p in path.split("/") if p]
    if not where or not parts or len(parts) > 2:
        raise BadRedisURL(f"{redacted(url)}: expected redis-sentinel://host:port[,host:port"
                          "...]/SERVICE[/db]")
    hosts = []
    for item in where.split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise BadRedisURL(f"{redacted(url)}: '{item[:60]}' is not host:port")
        hosts.append((host.strip("[]"), int(port)))
    db = parts[1] if len(parts) == 2 else "0"
    if not db.isdigit():
        raise BadRedisURL(f"{redacted(url)}: the database must be a number, not '{db[:20]}'")
    return SentinelAddress(tuple(hosts), parts[0], int(db), username, password)


def is_sentinel(url: str) -> bool:
    return url.split("://", 1)[0].lower() == SENTINEL_SCHEME


def connect(url: str, *, max_connections: int, decode: bool = True,
            socket_timeout: float | None = None, extra_timeout: float = 0.0) -> aioredis.Redis:
    """A client of Redis at ``url`` on a pool of at most ``max_connections``. A command that
    finds every connection in use waits for one (``POOL_WAIT_S`` at most) instead of
    failing with "too many connections": a crowd of viewers, transcript downloads and HLS
    players queues for the pool, and only a Redis that does not answer fails them.
    ``extra_timeout`` lengthens the socket timeout for a client whose commands block on
    purpose (``XREAD BLOCK``)."""
    timeout = (SOCKET_TIMEOUT_S if socket_timeout is None else socket_timeout) + extra_timeout
    # a pooled connection Redis closed (CLIENT KILL, a restart, an idle timeout) fails at
    # its next use: try once more on a new one instead of failing a viewer's join. Only on
    # a closed connection, not a timeout: a command that timed out may have run (livetrans'
    # writes are idempotent anyway, but a stalled Redis must not be waited on twice)
    options = {"retry": Retry(ExponentialBackoff(cap=0.2, base=0.02), 2,
                              supported_errors=(rex.ConnectionError,)),
               "socket_connect_timeout": CONNECT_TIMEOUT_S, "socket_timeout": timeout,
               "health_check_interval": 15, "decode_responses": decode,
               # bytes another client wrote are data: a bad one must not fail a whole read
               "encoding_errors": "replace",
               "max_connections": max_connections, "timeout": POOL_WAIT_S}
    if is_sentinel(url):
        address = parse_sentinel(url)
        sentinel = Sentinel(list(address.hosts), socket_timeout=CONNECT_TIMEOUT_S,
                            socket_connect_timeout=CONNECT_TIMEOUT_S)
        return sentinel.master_for(address.service, db=address.db,
                                   username=address.username, password=address.password,
                                   connection_pool_class=BlockingSentinelPool,
                                   **options)
    pool = aioredis.BlockingConnectionPool.from_url(url, **options)
    return aioredis.Redis.from_pool(pool)  # the client owns the pool: aclose closes it


def probe(url: str, timeout: float = 3.0) -> None:
    """Raise ``ConnectionError``-like ``RuntimeError`` (one line) unless Redis at ``url``
    answers a PING: ``serve`` checks before it starts, so a wrong address is not found by
    the first speaker."""
    import redis
    from redis.sentinel import Sentinel

    try:
        if is_sentinel(url):
            address = parse_sentinel(url)
            sentinel = Sentinel(list(address.hosts), socket_timeout=timeout,
                                socket_connect_timeout=timeout)
            client = sentinel.master_for(address.service, db=address.db,
                                         username=address.username,
                                         password=address.password, socket_timeout=timeout)
        else:
            client = redis.Redis.from_url(url, socket_connect_timeout=timeout,
                                          socket_timeout=timeout)
    except (ValueError, rex.RedisError) as exc:
        raise BadRedisURL(f"{redacted(url)}: {describe(exc)}") from None
    try:
        client.ping()
    except rex.RedisError as exc:
        raise RuntimeError(f"{redacted(url)}: {describe(exc)}") from None
    finally:
        client.close()


class ReplicaWait:
    """Kept writes on a Sentinel-managed primary wait until a replica has them (``WAIT``),
    so that a failover does not drop them. While none confirms, the write is made again
    (the primary may have changed under us; every kept write is idempotent), for
    ``REPLICATION_PATIENCE_S``: longer than Sentinel takes to demote the old primary, whose
    writes then fail with READONLY and go to the new one.

    Only replicas that exist are waited for. A primary with no replica connected (the one
    Sentinel just promoted after its old primary died, or one whose replicas are down) has
    nothing to confirm a copy: the write is kept on that primary alone at once (logged
    once until a replica is back), so finals reach other replicas' viewers seconds after a
    promotion instead of after the whole patience. A replica that is connected but does not
    confirm costs the patience once: until one confirms again, writes are kept on the
    primary only (logged) rather than each waiting the whole patience."""

    def __init__(self, what: str, patience_s: float | None = None) -> None:
        self.what = what
        self.patience_s = REPLICATION_PATIENCE_S if patience_s is None else patience_s
        self.away = False  # no replica confirmed within the patience, none since
        self.alone = False  # the primary had no replica connected at the last write

    async def write(self, client: aioredis.Redis, op: Callable[[], Awaitable[object]]) -> None:
        await op()
        deadline = time.monotonic() + (0.0 if self.away else self.patience_s)
        while True:
            if await connected_replicas(client) == 0:
                self._note_alone(True)
                return
            self._note_alone(False)
            if int(await client.execute_command("WAIT", 1, REPLICATION_WAIT_MS)) >= 1:
                break
            if time.monotonic() > deadline:
                if not self.away:
                    log.warning("%s: no replica confirmed a write within %.0f s; writes are "
                                "kept on the primary only until one does", self.what,
                                self.patience_s)
                self.away = True
                return
            await op()
        if self.away:
            log.warning("%s: a replica confirms writes again", self.what)
        self.away = False

    def _note_alone(self, alone: bool) -> None:
        """One log line when the primary loses its last replica, one when one is back."""
        if alone != self.alone:
            if alone:
                log.warning("%s: the primary has no replica connected; writes are kept on "
                            "the primary only until one connects", self.what)
            else:
                log.warning("%s: the primary has a replica again", self.what)
        self.alone = alone


async def connected_replicas(client: aioredis.Redis) -> int:
    """How many replicas the Redis behind ``client`` has connected (``ROLE``). A server
    that is no primary any more (demoted by a failover) answers as READONLY would: the
    write goes to the new primary after the caller's retry."""
    role = await client.execute_command("ROLE")
    kind = role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    if kind != "master":
        raise rex.ReadOnlyError("READONLY this Redis is a replica now (failover)")
    return len(role[2]) if len(role) > 2 and isinstance(role[2], list) else 0
