"""What a Redis failure means (``unavailable``: wait and retry, never skip) and the two
kinds of address ``--room-bus`` takes."""

from __future__ import annotations

import pytest
from redis import exceptions as rex

from app.rooms.redis_client import BadRedisURL, parse_sentinel, redacted, unavailable
from app.settings import Settings


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
    assert Settings(room_bus="redis-sentinel://s1:26379/events").room_bus
    assert Settings(room_bus="redis://127.0.0.1:6379/0").room_bus
    for bad in ("http://x", "redis-sentinel://nohost"):
        with pytest.raises(ValueError) as caught:
            Settings(room_bus=bad)
        assert "room_bus" in str(caught.value)
