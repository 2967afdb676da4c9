"""Room viewer tokens issued, checked, listed and revoked, on both stores: a SQLite file in
the data folder and Debian's redis-server on loopback. What must hold on each: a token
admits to its room until it expires or is revoked; revoking on one replica refuses on every
other at once; a restart keeps the tokens; the per-room bound holds; a store that is away
says so (``ViewerTokensUnavailable``) and works again when it is back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from app.rooms.viewer_tokens import (
    RoomTokenRecord,
    RoomViewerTokens,
    ViewerTokenStore,
    ViewerTokensUnavailable,
    open_viewer_tokens,
)
from app.rooms.viewer_tokens.redis_store import RedisViewerTokenStore
from tests.redis_server import redis_server

ROOM = "keynote-1"
KEYS = ("operator-key",)
T0 = float(int(time.time()))  # now (each test's start, below): Redis expires keys by its clock


@pytest.fixture(autouse=True)
def _now() -> None:
    """T0 is now at each test's start: a T0 taken when the module was collected is minutes
    old by the time a test runs in the full suite, and Redis had expired its tokens."""
    global T0
    T0 = float(int(time.time()))


class Clock:
    """A settable clock: expiry without waiting."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _client(url: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2,
                                   socket_timeout=5)


@pytest.fixture(params=["sqlite", "redis"])
def opener(request: pytest.FixtureRequest, tmp_path: Path):
    """Opens a store (``async with opener() as store``): a new connection each time, to
    the same file or the same Redis, as another replica or a restarted server would."""
    if request.param == "sqlite":
        @asynccontextmanager
        async def sqlite() -> AsyncIterator[ViewerTokenStore]:
            store = open_viewer_tokens(tmp_path / "data")
            try:
                yield store
            finally:
                await store.close()

        yield sqlite
        return
    with redis_server(tmp_path / "redis") as server:
        @asynccontextmanager
        async def on_redis() -> AsyncIterator[ViewerTokenStore]:
            client = _client(server.url)
            try:
                yield open_viewer_tokens(tmp_path / "unused", client)
            finally:
                await client.aclose()

        yield on_redis


def _tokens(store: ViewerTokenStore, clock: Clock, **kwargs) -> RoomViewerTokens:
    return RoomViewerTokens(KEYS, store, clock=clock, **kwargs)


def test_a_token_admits_to_its_room_until_it_expires(opener: Callable) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opener() as store:
            tokens = _tokens(store, clock)
            issued = await tokens.issue(ROOM, 3600)
            assert issued is not None and issued.record.expires_at == int(T0) + 3600
            signed = await tokens.check(ROOM, issued.token)
            assert signed is not None and signed.token_id == issued.record.token_id
            assert await tokens.check("other-room", issued.token) is None
            assert await tokens.check(ROOM, None) is None
            assert await tokens.check(ROOM, "0" * 32) is None
            # signed by the server but never issued by this store: not a token
            forged = tokens.signer.sign(ROOM, "f" * 16, int(T0) + 60)
            assert await tokens.check(ROOM, forged) is None
            assert [r.token_id for r in await tokens.issued(ROOM)] == [issued.record.token_id]
            clock.now = T0 + 3600
            assert await tokens.check(ROOM, issued.token) is None
            assert await tokens.issued(ROOM) == []

    asyncio.run(scenario())


def test_a_revocation_on_one_replica_holds_on_another_and_after_a_restart(
        opener: Callable) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opener() as store_a, opener() as store_b:
            a, b = _tokens(store_a, clock), _tokens(store_b, clock)
            kept = await a.issue(ROOM, 86400)
            gone = await a.issue(ROOM, 7200)
            assert kept is not None and gone is not None
            assert await b.check(ROOM, gone.token) is not None  # issued on a, valid on b
            assert await b.revoke(ROOM, gone.record.token_id)
            assert await a.check(ROOM, gone.token) is None  # revoked on b, refused on a
            assert not await a.revoke(ROOM, gone.record.token_id)  # nothing left to revoke
            assert not await a.revoke("other-room", kept.record.token_id)
            listed = await a.issued(ROOM)
            assert [(r.token_id, r.expires_at) for r in listed] == \
                [(kept.record.token_id, kept.record.expires_at)]
        async with opener() as restarted:  # a restarted server: the same file / Redis
            tokens = _tokens(restarted, clock)
            assert await tokens.check(ROOM, kept.token) is not None
            assert await tokens.check(ROOM, gone.token) is None

    asyncio.run(scenario())


def test_a_room_holds_a_bounded_number_of_live_tokens(opener: Callable) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opener() as store:
            tokens = _tokens(store, clock, max_per_room=3)
            short = await tokens.issue(ROOM, 60)
            assert short is not None
            assert await tokens.issue(ROOM, 3600) is not None
            assert await tokens.issue(ROOM, 3600) is not None
            assert await tokens.issue(ROOM, 3600) is None  # full
            assert await tokens.issue("other-room", 3600) is not None  # per room
            clock.now = T0 + 61  # the short one expired: its place is free again
            assert await tokens.issue(ROOM, 3600) is not None
            assert len(await tokens.issued(ROOM)) == 3

    asyncio.run(scenario())


def test_issuing_again_on_redis_is_idempotent_at_the_bound(tmp_path: Path) -> None:
    """On a Sentinel primary a write is made again until a replica has it: a token issued
    twice is kept once, and is not refused by the bound it now counts in."""
    with redis_server(tmp_path / "redis") as server:
        async def scenario() -> tuple[bool, bool, int]:
            client = _client(server.url)
            try:
                store = RedisViewerTokenStore(client)
                record = RoomTokenRecord(ROOM, "0123456789abcdef", int(T0), int(T0) + 600)
                first = await store.add(record, 1)
                again = await store.add(record, 1)
                return first, again, len(await store.issued(ROOM, T0))
            finally:
                await client.aclose()

        assert asyncio.run(scenario()) == (True, True, 1)


def test_redis_keys_expire_with_the_token_and_live_under_the_prefix(tmp_path: Path) -> None:
    """Redis itself forgets a token when it expires: a room used for years holds only its
    live tokens."""
    with redis_server(tmp_path / "redis") as server:
        async def scenario() -> tuple[list[str], int, int]:
            client = _client(server.url)
            try:
                tokens = RoomViewerTokens(KEYS, RedisViewerTokenStore(client, "lt"))
                issued = await tokens.issue(ROOM, 120)
                assert issued is not None
                token_key = f"lt:viewer-token:{ROOM}:{issued.record.token_id}"
                return (sorted(await client.keys("*")), await client.pttl(token_key),
                        await client.pttl(f"lt:viewer-tokens:{ROOM}"))
            finally:
                await client.aclose()

        keys, token_ttl, room_ttl = asyncio.run(scenario())
        assert len(keys) == 2 and all(k.startswith("lt:") for k in keys)
        assert 0 < token_ttl <= 121_000 and 0 < room_ttl <= 121_000


def test_a_redis_that_is_away_is_unavailable_then_works_again(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis", persist=True) as server:
        async def scenario() -> None:
            client = _client(server.url)
            try:
                tokens = RoomViewerTokens(KEYS, RedisViewerTokenStore(client))
                issued = await tokens.issue(ROOM, 3600)
                assert issued is not None
                await asyncio.to_thread(server.stop)
                for call in (lambda: tokens.check(ROOM, issued.token),
                             lambda: tokens.issue(ROOM, 3600), lambda: tokens.issued(ROOM),
                             lambda: tokens.revoke(ROOM, issued.record.token_id)):
                    with pytest.raises(ViewerTokensUnavailable):
                        await call()
                await asyncio.to_thread(server.start)
                assert await tokens.check(ROOM, issued.token) is not None
            finally:
                await client.aclose()

        asyncio.run(scenario())


def test_sqlite_in_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError) as err:
        open_viewer_tokens(blocker / "data")
    assert "\n" not in str(err.value) and "--data-dir" in str(err.value)
