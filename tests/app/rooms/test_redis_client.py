"""What a Redis failure means (``unavailable``: wait and retry, never skip), the two
kinds of address ``--room-bus`` takes, a pool that queues a crowd, and kept writes that
wait for the replicas that exist (real redis-server)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis import exceptions as rex

from app.rooms.redis_client import (
    BadRedisURL,
    ReplicaWait,
    connect,
    connected_replicas,
    parse_sentinel,
    redacted,
    unavailable,
)
from app.settings import Settings, SettingsError, load_settings
from tests.redis_server import RedisServer, redis_server, wait_synced


@pytest.mark.parametrize("exc", [
    rex.ConnectionError("Connection closed by server."),
    rex.TimeoutError("Timeout reading from socket"),
    ConnectionResetError(104, "reset"),
    rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
    rex.ReadOnlyError("You can't write against a read only replica."),
    rex.BusyLoadingError("Redis is loading the dataset in memory"),
    rex.NoPermissionError("this user has no permissions to run the 'xadd' command"),
    rex.ResponseError("MISCONF Redis is configured to save RDB snapshots, but it's "
                      "currently unable to persist to disk."),
    rex.ResponseError("BUSY Redis is busy running a script."),
    rex.ResponseError("NOREPLICAS Not enough good replicas to write."),
    rex.ResponseError("Error running script (call to f_0123): @user_script:3: -OOM "
                      "command not allowed when used memory > 'maxmemory'."),
    rex.ResponseError("ERR Error running script: @user_script:5: READONLY You can't write "
                      "against a read only replica."),
    rex.ResponseError("The user executing the script can't run this command or subcommand "
                      "script: 676e8971, on @user_script:5."),
    rex.ResponseError("ERR WAIT cannot be used with replica instances. Please also note that "
                      "since Redis 4.0 if a replica is configured to be writable ..."),
])
def test_faults_of_an_ordinary_redis_are_unavailable(exc: BaseException) -> None:
    assert unavailable(exc)


@pytest.mark.parametrize("exc", [
    rex.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    rex.ResponseError("ERR syntax error"),
    rex.DataError("Invalid input of type: 'dict'"),
    ValueError("a bug"),
])
def test_a_write_that_can_never_succeed_is_not_unavailable(exc: BaseException) -> None:
    assert not unavailable(exc)


def test_sentinel_addresses() -> None:
    address = parse_sentinel("redis-sentinel://u:p%40ss@s1:26379,[::1]:26380/events/2")
    assert address.hosts == (("s1", 26379), ("::1", 26380))
    assert (address.service, address.db, address.username, address.password) == (
        "events", 2, "u", "p@ss")
    assert parse_sentinel("redis-sentinel://s1:26379/events").db == 0
    for bad in ("redis-sentinel://s1:26379", "redis-sentinel://s1/events",
                "redis-sentinel://s1:26379/events/x", "redis-sentinel://s1:1/a/1/2"):
        with pytest.raises(BadRedisURL) as caught:
            parse_sentinel(bad)
        assert "\n" not in str(caught.value)
    assert redacted("redis-sentinel://u:secret@s1:26379/events") == \
        "redis-sentinel://***@s1:26379/events"


def test_settings_take_both_kinds_and_refuse_others_in_one_line() -> None:
    assert Settings(room_bus="redis-sentinel://s1:26379/events").rooms.bus
    assert Settings(room_bus="redis://127.0.0.1:6379/0").rooms.bus
    for bad in ("http://x", "redis-sentinel://nohost"):
        with pytest.raises(SettingsError) as caught:
            load_settings(room_bus=bad)
        assert "--room-bus (LIVETRANS_ROOM_BUS)" in str(caught.value)
        assert "\n" not in str(caught.value)


def test_a_crowd_waits_for_the_pool_instead_of_being_refused(tmp_path: Path) -> None:
    """More commands at once than the pool has connections (transcript downloads, HLS
    players, viewers' lookups): they queue for a connection, none fails with "too many
    connections"."""
    with redis_server(tmp_path / "redis") as server:
        async def crowd() -> list[object]:
            client = connect(server.url, max_connections=4)
            try:
                await client.set("k", "v")
                # each holds its connection a moment, so the crowd outnumbers the pool
                return await asyncio.gather(
                    *(client.execute_command("EVAL", "return redis.call('GET', 'k')", 0)
                      for _ in range(200)), return_exceptions=True)
            finally:
                await client.aclose()

        answers = asyncio.run(crowd())
    assert answers == ["v"] * 200


def test_a_primary_without_replicas_keeps_a_write_at_once(tmp_path: Path) -> None:
    """Nothing can confirm a copy on a primary with no replica (one just promoted after its
    old primary died): the write is made once and kept there, with no wait for the
    patience, and said once in the log."""
    with redis_server(tmp_path / "redis") as server:
        async def write() -> tuple[int, bool]:
            client = connect(server.url, max_connections=2)
            made = 0

            async def op() -> None:
                nonlocal made
                made += 1
                await client.incr("n")

            waiter = ReplicaWait("test", patience_s=600.0)
            try:
                async with asyncio.timeout(60):  # the patience would be ten minutes
                    await waiter.write(client, op)
                    await waiter.write(client, op)
                return made, waiter.alone
            finally:
                await client.aclose()

        made, alone = asyncio.run(write())
    assert made == 2 and alone


def test_a_primary_with_a_replica_waits_for_its_copy(tmp_path: Path) -> None:
    """With a replica connected, a kept write returns once the replica has it."""
    with redis_server(tmp_path / "primary") as primary:
        replica = RedisServer(tmp_path / "replica", replica_of=primary.port)
        replica.start()
        try:
            wait_synced(primary, replica)

            async def write() -> bool:
                client = connect(primary.url, max_connections=2)
                waiter = ReplicaWait("test", patience_s=600.0)
                try:
                    await waiter.write(client, lambda: client.set("kept", "1"))
                    return waiter.alone
                finally:
                    await client.aclose()

            alone = asyncio.run(write())
            copied = replica.cli("GET", "kept")
        finally:
            replica.stop()
    assert not alone and copied == "1"


def test_a_demoted_primary_is_unavailable_not_a_bug(tmp_path: Path) -> None:
    """A write that reached a Redis demoted to a replica by a failover is "not now": the
    outbox makes it again, and the Sentinel client finds the new primary."""
    with redis_server(tmp_path / "primary") as primary:
        replica = RedisServer(tmp_path / "replica", replica_of=primary.port)
        replica.start()
        try:
            async def ask() -> BaseException | int:
                client = connect(replica.url, max_connections=2)
                try:
                    return await connected_replicas(client)
                except Exception as exc:  # noqa: BLE001 - the point: which kind
                    return exc
                finally:
                    await client.aclose()

            outcome = asyncio.run(ask())
        finally:
            replica.stop()
    assert isinstance(outcome, BaseException) and unavailable(outcome)
