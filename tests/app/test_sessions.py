import pytest

from app.sessions import SessionBusyError, SessionStore


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_ttl_expiry_starts_fresh() -> None:
    clock = Clock()
    store = SessionStore(max_sessions=10, ttl_s=60, clock=clock)
    s = store.acquire("a")
    s.record("hi", [1, 2], "hallo", False, "de", "en")
    store.release(s)
    clock.t = 61
    assert store.get("a") is None and store.expired == 1
    fresh = store.acquire("a")
    assert fresh.previous_tokens == [] and fresh.revision == 0


def test_lru_eviction_keeps_recently_used() -> None:
    store = SessionStore(max_sessions=2, ttl_s=1e9)
    for sid in ("a", "b"):
        store.release(store.acquire(sid))
    store.release(store.acquire("a"))  # a is now most recent
    store.release(store.acquire("c"))
    assert store.get("b") is None and store.get("a") is not None and store.evicted == 1


def test_busy_session_rejects_a_second_update() -> None:
    store = SessionStore()
    s = store.acquire("a")
    with pytest.raises(SessionBusyError):
        store.acquire("a")
    store.release(s)
    store.release(store.acquire("a"))


def test_final_resets_the_draft_and_revision() -> None:
    store = SessionStore()
    s = store.acquire("a")
    assert s.record("x", [5], "x", False, "de", "en") == 1
    assert s.record("x y", [5, 6], "x y", False, "de", "en") == 2
    assert s.draft_for("de", "en") == [5, 6]
    assert s.draft_for("ja", "en") == []  # another language pair: no draft
    assert s.record("x y.", [5, 6, 7], "x y.", True, "de", "en") == 3
    assert s.previous_tokens == [] and s.revision == 0 and s.segment == 1


def test_sessions_of_different_owners_are_separate() -> None:
    store = SessionStore()
    mine = store.acquire("shared-id", owner="key1")
    mine.record("x", [1], "x", False, "de", "en")
    store.release(mine)
    theirs = store.acquire("shared-id", owner="key2")
    assert theirs is not mine and theirs.previous_tokens == []


def test_agreed_prefix_tracks_the_two_latest_outputs() -> None:
    store = SessionStore(max_sessions=4, ttl_s=60)
    s = store.acquire("agree")
    s.record("a b", [1, 2, 3], "x", False, "de", "en")
    assert s.previous_agreed == 0  # one output is no agreement
    s.record("a b c", [1, 2, 4, 5], "y", False, "de", "en")
    assert s.previous_agreed == 2
    s.record("a b c.", [1, 2, 4, 5, 6], "z", True, "de", "en")
    assert s.previous_agreed == 0 and s.previous_tokens == []
