"""A live connection's queue: finals kept in order, only the newest partial translated."""

from __future__ import annotations

from app.live.queue import SegmentQueue, Update


def test_finals_stay_in_order_and_only_the_newest_partial_waits() -> None:
    q = SegmentQueue()
    q.put(Update(0, "This", final=False))
    q.put(Update(0, "This is", final=False))  # the older partial is coalesced away
    q.put(Update(0, "This is it.", final=True))  # and the final supersedes its segment's
    q.put(Update(1, "Next", final=False))
    q.put(Update(1, "Next one.", final=True))
    q.put(Update(2, "And", final=False))
    taken = []
    while (u := q.take()) is not None:
        taken.append((u.segment, u.text, u.final))
    assert taken == [(0, "This is it.", True), (1, "Next one.", True), (2, "And", False)]
    assert q.coalesced == 3


def test_room_is_signalled_when_a_final_leaves() -> None:
    q = SegmentQueue()
    q.put(Update(0, "Done.", final=True))
    assert q.changed.is_set() and not q.room.is_set()
    q.take()
    assert q.room.is_set()
    assert q.take() is None


def test_clear_hands_back_every_final_in_order_and_makes_room() -> None:
    q = SegmentQueue()
    for segment in range(3):
        q.put(Update(segment, f"Final {segment}.", final=True))
    q.put(Update(3, "Part", final=False))
    assert [u.segment for u in q.clear()] == [0, 1, 2]
    assert q.take() is None and q.room.is_set()
