import pytest

from app.translation.sessions import (
    DraftPlan,
    Session,
    SessionBusyError,
    SessionStore,
    SessionStoreFullError,
    StaleUpdateError,
)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_ttl_expiry_starts_fresh() -> None:
    clock = Clock()
    store = SessionStore(max_sessions=10, ttl_s=60, clock=clock)
    s = store.acquire("a")
    s.commit("hi", [1, 2], False, "de", "en")
    store.release(s)
    clock.t = 61
    assert store.get("a") is None and len(store) == 0
    fresh = store.acquire("a")
    assert fresh.previous_tokens == [] and fresh.revision == 0


def test_lru_eviction_keeps_recently_used() -> None:
    store = SessionStore(max_sessions=2, ttl_s=1e9)
    for sid in ("a", "b"):
        store.release(store.acquire(sid))
    store.release(store.acquire("a"))  # a is now most recent
    store.release(store.acquire("c"))
    assert store.get("b") is None and store.get("a") is not None and len(store) == 2


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
    assert s.commit("x", [5], False, "de", "en") == 1
    assert s.commit("x y", [5, 6], False, "de", "en") == 2
    assert s.plan_draft("de", "en") == DraftPlan([5, 6], 1)
    assert s.plan_draft("ja", "en") == DraftPlan()  # another language pair: no draft
    assert s.commit("x y.", [5, 6, 7], True, "de", "en") == 3
    assert s.plan_draft("de", "en") == DraftPlan() and s.revision == 0


def test_sessions_of_different_owners_are_separate() -> None:
    store = SessionStore()
    mine = store.acquire("shared-id", owner="key1")
    mine.commit("x", [1], False, "de", "en")
    store.release(mine)
    theirs = store.acquire("shared-id", owner="key2")
    assert theirs is not mine and theirs.previous_tokens == []


def test_agreed_prefix_tracks_the_two_latest_outputs() -> None:
    store = SessionStore(max_sessions=4, ttl_s=60)
    s = store.acquire("agree")
    s.commit("a b", [1, 2, 3], False, "de", "en")
    assert s.previous_agreed == 0  # one output is no agreement
    s.commit("a b c", [1, 2, 4, 5], False, "de", "en")
    assert s.previous_agreed == 2
    s.commit("a b c.", [1, 2, 4, 5, 6], True, "de", "en")
    assert s.previous_agreed == 0 and s.previous_tokens == []


def test_a_store_full_of_busy_sessions_refuses_a_new_one_and_keeps_them() -> None:
    store = SessionStore(max_sessions=2, ttl_s=1e9)
    held = [store.acquire("a"), store.acquire("b")]
    with pytest.raises(SessionStoreFullError):
        store.acquire("c")
    assert len(store) == 2 and store.get("c") is None
    # a busy session's own next update is still a plain 409, not "store full"
    with pytest.raises(SessionBusyError):
        store.acquire("a")
    store.release(held[0])
    c = store.acquire("c")  # the idle one makes room
    assert store.get("a") is None and store.get("b") is held[1] and c.busy
    assert len(store) == 2


def test_eviction_skips_busy_sessions_and_takes_the_least_recent_idle_one() -> None:
    store = SessionStore(max_sessions=3, ttl_s=1e9)
    busy = store.acquire("old-busy")
    store.release(store.acquire("idle-1"))
    store.release(store.acquire("idle-2"))
    store.release(store.acquire("new"))
    assert store.get("old-busy") is busy and store.get("idle-1") is None
    assert store.get("idle-2") is not None and store.get("new") is not None


def test_session_ids_one_rule() -> None:
    """The rule the request schemas apply (``SessionId``: the body's ``session_id``; the
    X-Session-ID header uses the same pattern and length)."""
    from pydantic import TypeAdapter, ValidationError

    from app.api.schemas import SessionId

    ids = TypeAdapter(SessionId)
    for good in ("talk-1", "a.b_c:d-E9", "x" * 128):
        assert ids.validate_python(good) == good
    for bad in ("", "a b", "a\nb", "a/b", "é", "a\ud800", "x" * 129):
        with pytest.raises(ValidationError):
            ids.validate_python(bad)


def test_a_partial_that_repeats_or_shortens_the_newest_source_is_stale() -> None:
    s = SessionStore().acquire("order")
    s.check_newer("Ladies and", False)
    s.commit("Ladies and", [1], False, "de", "en")
    s.check_newer("Ladies and gentlemen", False)
    s.commit("Ladies and gentlemen", [1, 2], False, "de", "en")
    for stale in ("Ladies and", "Ladies and gentlemen", "Ladies"):
        with pytest.raises(StaleUpdateError):
            s.check_newer(stale, False)
    s.check_newer("Ladies and gentleman, welcome", False)  # a revision, not a prefix
    s.check_newer("Ladies and gentlemen", True)  # a final repeating its partial is fine
    s.commit("Ladies and gentlemen.", [1, 2, 3], True, "de", "en")
    # after the final, a late partial of that segment cannot start the next one
    with pytest.raises(StaleUpdateError):
        s.check_newer("Ladies and", False)
    s.check_newer("Welcome", False)


def test_seq_orders_updates_exactly_and_allows_retractions() -> None:
    s = SessionStore().acquire("seq")
    s.check_newer("a b c", False, seq=1)
    s.commit("a b c", [1], False, "de", "en")
    s.applied(1)
    s.check_newer("a b", False, seq=2)  # a shorter hypothesis, but newer: applied
    s.applied(2)
    for old in (2, 1, 0):
        with pytest.raises(StaleUpdateError):
            s.check_newer("a b c d", False, seq=old)
    with pytest.raises(StaleUpdateError):
        s.check_newer("a b c d.", True, seq=2)  # a retried final is refused too
    s.applied(None)
    assert s.newest_seq == 2


def test_plan_draft_is_the_previous_output_and_its_agreed_prefix() -> None:
    s = Session("plan")
    assert s.plan_draft("de", "en") == DraftPlan()  # a new session has no draft
    s.commit("a", [1, 2, 3], False, "de", "en")
    s.commit("a b", [1, 2, 9], False, "de", "en")
    plan = s.plan_draft("de", "en")
    assert plan == DraftPlan([1, 2, 9], 2)
    plan.tokens.append(7)  # a plan is a copy: the caller cannot change the session's draft
    assert s.plan_draft("de", "en").tokens == [1, 2, 9]
    assert s.plan_draft("de", "fr") == DraftPlan()  # another source language: no draft


def test_a_dropped_output_commits_an_empty_draft_but_still_counts_as_a_revision() -> None:
    s = Session("dropped")
    s.commit("a", [1, 2], False, "de", "en")
    assert s.commit("a b", [], False, "de", "en") == 2  # e.g. a loop: refused as a draft
    assert s.plan_draft("de", "en") == DraftPlan()
    assert s.newest_source == "a b"


def test_commit_applies_the_clients_seq_with_the_translation() -> None:
    s = Session("seq-commit")
    s.commit("a", [1], False, "de", "en", seq=4)
    assert s.newest_seq == 4
    with pytest.raises(StaleUpdateError):
        s.check_newer("a b", False, seq=4)
    s.commit("a b", [1, 2], False, "de", "en")  # no seq: the newest stays
    assert s.newest_seq == 4


def test_start_segment_empties_the_draft_and_keeps_the_order() -> None:
    s = Session("segments")
    s.commit("Ladies and", [1, 2], False, "de", "en")
    s.start_segment()
    assert s.plan_draft("de", "en") == DraftPlan() and s.revision == 0
    assert s.commit("Welcome", [3], False, "de", "en") == 1
    with pytest.raises(StaleUpdateError):  # order is the session's, across segments
        s.check_newer("Welcome", False)


def test_enter_segment_starts_a_new_segment_only_for_another_label() -> None:
    s = Session("labels")
    s.enter_segment(0)
    s.commit("a", [1], False, "de", "en")
    s.enter_segment(0)  # the same segment: its draft stays
    assert s.plan_draft("de", "en").tokens == [1]
    s.enter_segment(1)  # the client moved on without a final: no draft from segment 0
    assert s.plan_draft("de", "en") == DraftPlan() and s.segment_label == 1
    s.commit("b", [2], False, "de", "en")
    s.commit("b c.", [2, 3], True, "de", "en")  # a final ends the segment
    assert s.segment_label is None and s.plan_draft("de", "en") == DraftPlan()
