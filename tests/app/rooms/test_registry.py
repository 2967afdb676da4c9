"""Rooms without sockets: the registry's bounds and lifecycle, tokens, the viewer queue."""

from __future__ import annotations

import pytest

from app.rooms.registry import (
    LanguageNotInRoomError,
    RoomRegistry,
    RoomTakenError,
    TooManyViewersError,
    ViewerQueue,
    valid_room,
)

BOUNDS = {"max_viewers": 100, "max_per_room": 100}


def _caption(seg: int, final: bool, lang: str = "de") -> tuple[dict, str]:
    payload = {"type": "caption", "segment": seg, "lang": lang, "final": final}
    return payload, f"{lang}:{seg}:{'F' if final else 'p'}"


def _drain(queue: ViewerQueue) -> list[str]:
    out = []
    while (frame := queue.pop()) is not None:
        out.append(frame.text)
    return out


# -- the viewer queue ----------------------------------------------------------------------
def test_a_full_queue_drops_its_oldest_partial_and_keeps_every_final() -> None:
    q = ViewerQueue(max_frames=3)
    assert [q.put(t, f) for t, f in [("p1", False), ("F1", True), ("p2", False)]] == [0, 0, 0]
    assert q.put("p3", False) == 1  # p1 goes
    assert q.put("F2", True) == 1  # p2 goes
    assert _drain(q) == ["F1", "p3", "F2"] and q.dropped == 2


def test_a_queue_of_finals_only_refuses_the_new_partial_but_keeps_new_finals() -> None:
    q = ViewerQueue(max_frames=2, max_finals=10)
    q.put("F1", True)
    q.put("F2", True)
    assert q.put("p", False) == 1  # the incoming partial is the oldest partial
    assert q.put("F3", True) == 0  # over the soft bound: finals are never dropped
    assert _drain(q) == ["F1", "F2", "F3"] and q.finals == 0


def test_finals_piling_up_past_the_bound_mark_the_viewer_for_disconnection() -> None:
    q = ViewerQueue(max_frames=2, max_finals=3)
    for i in range(3):
        q.put(f"F{i}", True)
    assert not q.overflowed
    q.put("F3", True)
    assert q.overflowed and len(q) == 0
    assert q.put("F4", True) == 0 and len(q) == 0  # nothing more is queued for it


def test_a_closed_queue_takes_nothing_but_keeps_what_it_holds() -> None:
    q = ViewerQueue()
    q.put("F1", True)
    q.close()
    q.put("F2", True)
    assert _drain(q) == ["F1"] and q.closed


# -- the registry --------------------------------------------------------------------------
def test_one_speaker_per_room_and_the_room_is_free_again_after_release() -> None:
    reg = RoomRegistry()
    a, b = object(), object()
    room = reg.claim("talk", a, ["de"])
    assert reg.claim("talk", a, ["de"]) is room  # the same speaker again is no conflict
    with pytest.raises(RoomTakenError):
        reg.claim("talk", b, ["ja"])
    reg.release(room, b)  # not its speaker: nothing happens
    assert reg.rooms["talk"] is room
    reg.release(room, a)
    assert "talk" not in reg.rooms
    assert reg.claim("talk", b, ["ja"]) is not room


def test_viewers_get_their_language_only_and_recent_finals_newest_last() -> None:
    reg = RoomRegistry(recent_limit=2)
    room = reg.claim("talk", object(), ["de", "ja"])
    early, recent = reg.join("talk", "de", **BOUNDS)
    assert recent == [] and early.room is room
    for seg in range(3):
        for lang in ("de", "ja"):
            room.publish(lang, *_caption(seg, False, lang), False)
            room.publish(lang, *_caption(seg, True, lang), True)
    assert _drain(early.queue) == [f"de:{s}:{k}" for s in range(3) for k in "pF"]
    assert early.wake.is_set()
    late, recent = reg.join("talk", "ja", **BOUNDS)
    assert [(c["segment"], c["lang"]) for c in recent] == [(1, "ja"), (2, "ja")]
    assert len(late.queue) == 0  # what recent holds is not queued again


def test_viewers_are_bounded_per_room_and_in_total() -> None:
    counts: list[int] = []
    reg = RoomRegistry(on_viewers=counts.append)
    viewers = [reg.join("a", "de", max_viewers=3, max_per_room=2)[0] for _ in range(2)]
    with pytest.raises(TooManyViewersError, match="room"):
        reg.join("a", "de", max_viewers=3, max_per_room=2)
    viewers.append(reg.join("b", "de", max_viewers=3, max_per_room=2)[0])
    with pytest.raises(TooManyViewersError, match="server"):
        reg.join("c", "de", max_viewers=3, max_per_room=2)
    for v in viewers:
        reg.leave(v)
        reg.leave(v)  # twice is harmless
    assert reg.viewers == 0 and counts[-1] == 0 and max(counts) == 3
    assert reg.rooms == {}  # rooms without speaker or viewers are forgotten


def test_viewers_waiting_before_the_talk_get_it_and_ended_after_it() -> None:
    reg = RoomRegistry()
    viewer, _ = reg.join("talk", "de", **BOUNDS)
    speaker = object()
    room = reg.claim("talk", speaker, ["de"])
    assert viewer.room is room
    room.publish("de", *_caption(0, True), True)
    reg.release(room, speaker)
    assert viewer.queue.closed and _drain(viewer.queue) == ["de:0:F"]
    assert "talk" not in reg.rooms  # a new talk starts afresh ...
    new_viewer, recent = reg.join("talk", "de", **BOUNDS)
    assert recent == [] and new_viewer.room is not room
    reg.leave(viewer)  # ... while the old room's viewers drain
    assert reg.viewers == 1


def test_dropped_partials_are_reported() -> None:
    dropped: list[int] = []
    reg = RoomRegistry(on_drop=dropped.append)
    room = reg.claim("talk", object(), ["de"])
    reg.join("talk", "de", max_viewers=9, max_per_room=9, queue_frames=1)
    reg.join("talk", "de", max_viewers=9, max_per_room=9, queue_frames=1)
    room.publish("de", *_caption(0, False), False)
    room.publish("de", *_caption(0, False), False)
    assert dropped == [2]  # one per viewer


def test_viewer_tokens_are_per_talk_and_only_needed_with_keys() -> None:
    open_reg = RoomRegistry()
    assert open_reg.token_ok_for_talk("talk", None, None) and not open_reg.tokens_required
    keyed = RoomRegistry({"k1", "k2"})
    token = keyed.token("talk", "t1")
    assert keyed.token_ok_for_talk("talk", "t1", token)
    assert not keyed.token_ok_for_talk("other", "t1", token)
    assert not keyed.token_ok_for_talk("talk", "t2", token)  # a later talk in the room
    assert not keyed.token_ok_for_talk("talk", None, token)  # no talk yet
    assert not keyed.token_ok_for_talk("talk", "t1", None)
    assert not keyed.token_ok_for_talk("talk", "t1", "k1")  # an API key is no viewer token
    assert RoomRegistry({"k2", "k1"}).token("talk", "t1") == token  # same keys, same tokens
    assert RoomRegistry({"k3"}).token("talk", "t1") != token
    assert "k1" not in token and len(token) == 32


def test_every_claim_of_a_room_is_a_new_talk_and_a_new_token() -> None:
    """A key that once opened a room must not admit viewers to another tenant's later talk
    there: the token names the talk, and a new speaker's claim is a new talk."""
    keyed = RoomRegistry({"k1"})
    first_speaker, second_speaker = object(), object()
    room = keyed.claim("talk", first_speaker, ["de"])
    first = room.talk_id
    assert keyed.claim("talk", first_speaker, ["de"]).talk_id == first  # same speaker
    old_token = keyed.token("talk", first)
    keyed.release(room, first_speaker)
    second = keyed.claim("talk", second_speaker, ["de"]).talk_id
    assert second != first
    assert not keyed.token_ok_for_talk("talk", second, old_token)


@pytest.mark.parametrize(("name", "ok"), [
    ("keynote-1", True), ("a", True), ("Room_2.b", True), ("x" * 64, True),
    ("", False), ("x" * 65, False), ("-lead", False), ("a b", False), ("a/b", False),
    ("caf\u00e9", False), ("a\n", False), (7, False), (None, False),
])
def test_room_names_are_short_and_safe(name: object, ok: bool) -> None:
    assert valid_room(name) is ok


@pytest.mark.parametrize("token", [
    "caf\u00e9" * 8, "\u00ff" * 32, "\ud800", "\x00" * 32, "x" * 100_000, "", " ", "🙂",
])
def test_any_token_text_is_a_plain_no(token: str) -> None:
    """compare_digest raises on non-ASCII str: that was an HTTP 500 with a traceback."""
    keyed = RoomRegistry({"k1"})
    assert keyed.token_ok_for_talk("talk", "t1", token) is False


def test_a_viewer_of_a_language_the_talk_lacks_is_refused() -> None:
    reg = RoomRegistry()
    reg.claim("talk", speaker := object(), ["de", "ja"])
    with pytest.raises(LanguageNotInRoomError, match="de, ja"):
        reg.join("talk", "fr", **BOUNDS)
    viewer, _ = reg.join("talk", "ja", **BOUNDS)
    assert viewer.lang == "ja" and reg.viewers == 1
    reg.release(reg.rooms["talk"], speaker)


def test_viewers_waiting_in_a_language_the_talk_lacks_are_told_and_ended() -> None:
    reg = RoomRegistry()
    waiting_fr, _ = reg.join("talk", "fr", **BOUNDS)
    waiting_de, _ = reg.join("talk", "de", **BOUNDS)
    reg.claim("talk", object(), ["de"])
    told = _drain(waiting_fr.queue)
    assert len(told) == 1 and '"lang_not_in_room"' in told[0] and waiting_fr.queue.closed
    assert _drain(waiting_de.queue) == [] and not waiting_de.queue.closed
