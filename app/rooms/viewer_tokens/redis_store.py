"""Room viewer tokens on Redis: the store of a server whose rooms live on a Redis room bus,
so a token issued on one replica admits on every replica, and a revocation on one refuses
on every replica at once (each check asks Redis; nothing is cached).

Keys, under the bus's prefix:

- ``{p}:viewer-token:{room}:{id}``: a live token's ``created_at`` and ``expires_at``, a hash
  that Redis deletes when the token expires (``PEXPIREAT``);
- ``{p}:viewer-tokens:{room}``: the room's token ids, a sorted set by expiry (for the list
  and the per-room bound), pruned of expired ids whenever a token is issued.

Room names (``A-Z a-z 0-9 . _ -``) and ids (hex) hold no ``:``, so keys cannot collide.
Issuing is one Lua script (the prune, the bound and the write at once). On a
Sentinel-managed primary a revocation is written until a replica has it, so a failover does
not bring a revoked token back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis

from app.rooms.redis_client import ReplicaWait, guarded
from app.rooms.viewer_tokens.store import RoomTokenRecord, ViewerTokensUnavailable

T = TypeVar("T")

# KEYS: the token's hash, the room's set. ARGV: id, created_at, expires_at, max per room.
# Returns 1 if kept, 0 if the room has its bound of live tokens. Idempotent: a write made
# again (waiting for a replica) finds its token there and keeps it.
ISSUE = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'created_at', ARGV[2], 'expires_at', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]) * 1000)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[2], tonumber(last[2]) * 1000)
return 1
"""


def _int(value: Any) -> int:
    return int(value.decode() if isinstance(value, bytes) else value)


class RedisViewerTokenStore:
    """``ViewerTokenStore`` on Redis; the client is the room bus's, which the bus closes."""

    def __init__(self, client: aioredis.Redis, prefix: str = "livetrans", *,
                 replicated: bool = False) -> None:
        self.client = client
        self.prefix = prefix
        self._replicas = ReplicaWait("viewer tokens") if replicated else None
        self._issue = client.register_script(ISSUE)

    def _token_key(self, room: str, token_id: str) -> str:
        return f"{self.prefix}:viewer-token:{room}:{token_id}"

    def _room_key(self, room: str) -> str:
        return f"{self.prefix}:viewer-tokens:{room}"

    async def _call(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        return await guarded(op, f"viewer tokens on Redis: {what}", ViewerTokensUnavailable)

    async def _durably(self, op: Callable[[], Awaitable[object]]) -> None:
        if self._replicas is None:
            await op()
        else:
            await self._replicas.write(self.client, op)

    async def add(self, record: RoomTokenRecord, max_per_room: int) -> bool:
        kept = 0

        async def op() -> None:
            nonlocal kept
            kept = _int(await self._issue(
                keys=[self._token_key(record.room, record.token_id), self._room_key(record.room)],
                args=[record.token_id, record.created_at, record.expires_at, max_per_room]))

        await self._call("issue", lambda: self._durably(op))
        return kept == 1

    async def active(self, room: str, token_id: str, now: float) -> bool:
        raw = await self._call("check", lambda: self.client.hget(
            self._token_key(room, token_id), "expires_at"))
        return raw is not None and _int(raw) > now

    async def issued(self, room: str, now: float) -> list[RoomTokenRecord]:
        ids = await self._call("list", lambda: self.client.zrangebyscore(
            self._room_key(room), f"({int(now)}", "+inf"))
        records = []
        for member in ids:
            token_id = member.decode() if isinstance(member, bytes) else str(member)
            values = await self._call("list", lambda t=token_id: self.client.hmget(
                self._token_key(room, t), "created_at", "expires_at"))
            if values[0] is None or values[1] is None:
                continue  # revoked or expired since
            expires_at = _int(values[1])
            if expires_at > now:
                records.append(RoomTokenRecord(room, token_id, _int(values[0]), expires_at))
        return records

    async def revoke(self, room: str, token_id: str) -> bool:
        removed = 0

        async def op() -> None:
            nonlocal removed
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(self._token_key(room, token_id))
            pipe.zrem(self._room_key(room), token_id)
            deleted, _ = await pipe.execute()
            removed = max(removed, _int(deleted))  # a retry finds it gone: still revoked

        await self._call("revoke", lambda: self._durably(op))
        return removed > 0

    async def close(self) -> None:
        return None  # the client is the bus's
