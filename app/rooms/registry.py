"""Rooms: one speaker's captions, broadcast to read-only viewers (API.md, "Events").

A speaker's live connection that names a ``room`` publishes every caption frame it sends
to that room; viewers on ``WebSocket /v1/live/watch`` subscribe to one language of it.
Viewers cost no engine time: the speaker's frame is encoded once and the same text is
queued for every viewer of its language.

A slow viewer must never slow the speaker or other viewers, so publishing never waits: it
appends to each viewer's own bounded ``ViewerQueue`` and wakes that viewer's sender task.
When a queue is full its oldest *partial* frame is dropped (a partial is replaced by the
next one anyway); finals are never dropped. A viewer so far behind that even its finals
pile up past ``max_finals`` is disconnected instead (it may reconnect and get ``recent``):
keeping them would let one stalled socket hold memory for the whole talk.

Talks: each claim of a room starts a *talk* with its own id (``talk_id``). Viewer tokens:
with API keys, a viewer shows an HMAC of the room name and the talk id, handed to the
speaker in ``ready``; it admits to that talk only, not to a later talk in a room of the same
name (another tenant's). Viewers never hold a speaker key. The HMAC key is derived from the
server's API keys, so every replica with the same keys accepts the same tokens and nothing
needs storing.

Across replicas (``app.rooms.bus``), a talk whose speaker is on another replica appears here as a
room whose ``speaker`` is a ``RemoteTalk``: its frames arrive from the bus and are handed to
this replica's viewers exactly as a local speaker's are.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

ROOM_MAX_CHARS = 64
# Room names travel in URLs, logs and tokens: a short, safe charset, no leading punctuation.
_ROOM_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RECENT_FINALS = 50  # final captions per language a late viewer gets in ``joined``
VIEWER_QUEUE_FRAMES = 64  # a viewer's outgoing frames before partials are dropped
VIEWER_MAX_FINALS = 1024  # finals waiting for one viewer before it is disconnected


def valid_room(name: object) -> bool:
    """True for 1-64 characters of ``A-Z a-z 0-9 . _ -``, starting with a letter or digit."""
    return isinstance(name, str) and _ROOM_RE.fullmatch(name) is not None


class RoomTakenError(RuntimeError):
    """The room already has a speaker (one speaker per room)."""


class TooManyViewersError(RuntimeError):
    """A viewer bound (per room or in total) is reached; the message says which."""


class LanguageNotInRoomError(RuntimeError):
    """The room's talk is not captioned in the viewer's language (it would get nothing)."""


def not_in_room_message(name: str, lang: str, langs: list[str]) -> str:
    return (f"room '{name}' is captioned in {', '.join(langs) or 'no language'}; "
            f"lang '{lang}' is not among them")


@dataclass
class Frame:
    """One encoded frame waiting for a viewer, and whether it is a final (never dropped)."""

    text: str
    final: bool
    segment: int = -1  # the caption's segment (-1: not a caption)


def new_talk_id() -> str:
    """64 random bits, hex: names a talk in tokens, transcripts and the bus."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class RemoteTalk:
    """The speaker of a room whose talk runs on another replica (``app.rooms.bus``)."""

    talk_id: str
    replica: str


class ViewerQueue:
    """A viewer's outgoing frames: bounded, dropping the oldest partial when full.

    Pure logic (no sockets), so the drop policy is testable on its own. ``put`` never
    blocks and never fails: the publisher is the speaker, who must not wait for a viewer.
    """

    def __init__(self, max_frames: int = VIEWER_QUEUE_FRAMES,
                 max_finals: int = VIEWER_MAX_FINALS) -> None:
        if max_frames < 1:
            raise ValueError("max_frames must be >= 1")
        self.max_frames = max_frames
        self.max_finals = max(max_finals, 1)
        self.frames: deque[Frame] = deque()
        self.finals = 0  # finals among ``frames``
        self.dropped = 0  # partial frames dropped so far
        self.overflowed = False  # finals piled past ``max_finals``: the viewer must go
        self.closed = False  # the talk ended: send what is queued, then ``ended``

    def __len__(self) -> int:
        return len(self.frames)

    def put(self, text: str, final: bool, segment: int = -1) -> int:
        """Queue a frame; returns how many partial frames were dropped to make room (0-1).

        A full queue drops its oldest partial; when it holds none, an incoming partial is
        itself the oldest partial and is dropped, and an incoming final is kept anyway
        (finals are never dropped; ``max_finals`` bounds them by disconnecting instead).
        """
        if self.closed or self.overflowed:
            return 0
        dropped = 0
        if len(self.frames) >= self.max_frames:
            victim = next((i for i, f in enumerate(self.frames) if not f.final), None)
            if victim is not None:
                del self.frames[victim]
                dropped = 1
            elif not final:
                self.dropped += 1
                return 1
        self.frames.append(Frame(text, final, segment))
        if final:
            self.finals += 1
            if self.finals > self.max_finals:
                self.overflowed = True
                self.frames.clear()
                self.finals = 0
        self.dropped += dropped
        return dropped

    def pop(self) -> Frame | None:
        """The oldest queued frame, or None when there is none."""
        if not self.frames:
            return None
        frame = self.frames.popleft()
        if frame.final:
            self.finals -= 1
        return frame

    def close(self) -> None:
        """The talk ended: nothing more is queued; what is queued is still sent."""
        self.closed = True


@dataclass(eq=False)
class Viewer:
    """One viewer connection's subscription: its room, language and outgoing queue."""

    room: Room
    lang: str
    queue: ViewerQueue
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # the talk this viewer's token admits it to (None: any, a server without API keys);
    # a different talk starting in the room ends this viewer instead of showing it
    talk_id: str | None = None


@dataclass(eq=False)
class Room:
    """A speaker's talk: the viewers per language and the recent finals per language."""

    name: str
    recent_limit: int = RECENT_FINALS
    speaker: object | None = None
    langs: list[str] = field(default_factory=list)  # the speaker's target languages
    talk_id: str | None = None  # the current talk (None: viewers wait for one)
    started_at: float = 0.0  # the talk's start, unix seconds
    viewers: dict[str, set[Viewer]] = field(default_factory=dict)
    recent: dict[str, deque[dict[str, Any]]] = field(default_factory=dict)
    on_drop: Callable[[int], None] | None = None
    # told when the bus finds this replica's talk's room owned by another replica
    on_lost: Callable[[], None] | None = None

    @property
    def viewer_count(self) -> int:
        return sum(len(v) for v in self.viewers.values())

    def publish(self, lang: str, payload: dict[str, Any], text: str, final: bool) -> None:
        """Hand one encoded caption frame of ``lang`` to its viewers; never waits.

        ``payload`` is the frame as a dict (kept in ``recent`` when final), ``text`` the
        same frame encoded once for every viewer.
        """
        if final:
            self.recent.setdefault(lang, deque(maxlen=self.recent_limit)).append(payload)
        segment = payload.get("segment", -1)
        segment = segment if isinstance(segment, int) else -1
        dropped = 0
        for viewer in self.viewers.get(lang, ()):
            dropped += viewer.queue.put(text, final, segment)
            viewer.wake.set()
        if dropped and self.on_drop is not None:
            self.on_drop(dropped)

    def recent_finals(self, lang: str) -> list[dict[str, Any]]:
        """The recent final captions of ``lang``, newest last."""
        return list(self.recent.get(lang, ()))

    @property
    def remote(self) -> bool:
        return isinstance(self.speaker, RemoteTalk)

    def end(self) -> None:
        """The talk is over: every viewer gets what is queued, then ``ended``."""
        self.speaker = None
        for viewers in self.viewers.values():
            for viewer in viewers:
                viewer.queue.close()
                viewer.wake.set()


def token_secret(api_keys: Iterable[str]) -> bytes:
    """The HMAC key of viewer tokens, derived from the API keys (one-way: a token reveals
    no key), so replicas sharing keys share tokens and a key rotation revokes them."""
    joined = "\x00".join(sorted(api_keys)).encode()
    return hashlib.sha256(b"livetrans viewer tokens\x00" + joined).digest()


class RoomRegistry:
    """The rooms of one server: one speaker per room, viewers bounded per room and in total.

    Runs on the event loop only (no locks): ``claim``, ``join``, ``leave``, ``release`` and
    ``Room.publish`` are synchronous, so a viewer's ``recent`` snapshot and its queue see
    each frame exactly once. A room exists while it has a speaker or viewers; viewers may
    join before the speaker starts (they wait for the talk). When the speaker leaves, the
    room is taken out of the registry at once (a new talk in the same room starts afresh)
    while its viewers drain their queues and get ``ended``.
    """

    def __init__(self, api_keys: Iterable[str] = (), *, recent_limit: int = RECENT_FINALS,
                 on_drop: Callable[[int], None] | None = None,
                 on_viewers: Callable[[int], None] | None = None) -> None:
        keys = set(api_keys)
        self.tokens_required = bool(keys)
        self._secret = token_secret(keys)
        self.recent_limit = recent_limit
        self.on_drop = on_drop
        self.on_viewers = on_viewers
        self.rooms: dict[str, Room] = {}
        self.viewers = 0  # in total, including viewers of ended rooms still draining

    # -- tokens --------------------------------------------------------------------------
    def token(self, room: str, talk_id: str) -> str:
        """The viewer token of one talk in ``room`` (128 bits of HMAC-SHA256, hex)."""
        message = f"{room}\x00{talk_id}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()[:32]

    def token_ok_for_talk(self, room: str, talk_id: str | None, token: str | None) -> bool:
        """Whether ``token`` admits a viewer to talk ``talk_id`` of ``room`` (always,
        without API keys; never to an unknown talk when keys are set)."""
        if not self.tokens_required:
            return True
        if not talk_id:
            return False
        # compare bytes: compare_digest raises on str with non-ASCII characters (a 500), and
        # a real token is 32 hex digits, so anything else is simply not it
        given = str(token or "").encode("utf-8", "replace")
        return bool(given) and hmac.compare_digest(self.token(room, talk_id).encode(), given)

    # -- speakers ------------------------------------------------------------------------
    def claim(self, name: str, speaker: object, langs: list[str], *,
              talk_id: str | None = None, started_at: float | None = None,
              displace_remote: bool = False) -> Room:
        """Make ``speaker`` the room's speaker (``RoomTakenError`` if it has one).

        ``displace_remote``: the bus has just given this replica the room, so a remote talk
        still shown here is over (its end is on its way) and gives way at once."""
        room = self.rooms.get(name)
        if room is not None and room.speaker is not None and room.speaker is not speaker:
            if not (displace_remote and room.remote):
                raise RoomTakenError(f"room '{name}' already has a speaker")
            self._end_room(room)
            room = None
        if room is None:
            room = self._new_room(name)
        if room.speaker is not speaker:
            room.talk_id = talk_id or (speaker.talk_id if isinstance(speaker, RemoteTalk)
                                       else new_talk_id())
            room.started_at = time.time() if started_at is None else started_at
            room.on_lost = None
        room.speaker, room.langs = speaker, list(langs)
        for lang, viewers in room.viewers.items():
            for viewer in list(viewers):
                if viewer.talk_id is not None and viewer.talk_id != room.talk_id:
                    # waited with a token of another talk: it does not admit to this one
                    self._close_viewer(viewer, "invalid_token", "this viewer token admits "
                                       "to another talk of the room, not to the one that "
                                       "started")
                elif lang not in room.langs:
                    # waited for the talk in a language it does not have: say so, end
                    self._close_viewer(viewer, "lang_not_in_room",
                                       not_in_room_message(name, lang, room.langs))
        return room

    def end_viewer(self, viewer: Viewer, code: str, message: str) -> None:
        """End one viewer whose access ended (its room viewer token was revoked): an
        ``error`` frame with ``code``, then ``ended``; the rest of the room goes on."""
        self._close_viewer(viewer, code, message)

    @staticmethod
    def _close_viewer(viewer: Viewer, code: str, message: str) -> None:
        frame = json.dumps({"type": "error", "code": code, "message": message})
        viewer.queue.put(frame, final=True)
        viewer.queue.close()
        viewer.wake.set()

    def release(self, room: Room, speaker: object) -> None:
        """The speaker is done (stopped or gone): its viewers get ``ended``."""
        if room.speaker is not speaker:
            return
        self._end_room(room)

    # -- talks on other replicas (called by ``app.rooms.bus``) ---------------------------------
    def remote_start(self, name: str, talk_id: str, replica: str, langs: list[str],
                     started_at: float, *, create: bool = False) -> Room | None:
        """A talk began in ``name`` on another replica. Viewers waiting here start
        following it; ``create`` makes the room even without viewers (a viewer is about
        to join it). A room with a local speaker is left alone (the bus's ownership makes
        that a stale message)."""
        room = self.rooms.get(name)
        if room is None and not create:
            return None
        if room is not None and room.speaker is not None and not room.remote:
            return None
        if room is not None and room.remote and room.talk_id == talk_id:
            return room
        if room is not None and room.remote:  # an older remote talk ended unseen
            self._end_room(room)
            room = None
        room = self.claim(name, RemoteTalk(talk_id, replica), langs)
        room.started_at = started_at
        return room

    def remote_caption(self, name: str, talk_id: str, payload: dict[str, Any],
                       text: str) -> None:
        """A caption frame of a remote talk, for this replica's viewers."""
        room = self.rooms.get(name)
        if room is None or not room.remote or room.talk_id != talk_id:
            return
        lang = payload.get("lang")
        if isinstance(lang, str):
            room.publish(lang, payload, text, bool(payload.get("final")))

    def remote_end(self, name: str, talk_id: str) -> None:
        """A remote talk ended (its speaker stopped, or its replica's lease ran out)."""
        room = self.rooms.get(name)
        if room is not None and room.remote and room.talk_id == talk_id:
            self._end_room(room)

    def remote_rooms(self) -> list[tuple[str, str]]:
        """(room, talk) of every room here that follows a talk on another replica."""
        return [(name, room.talk_id) for name, room in self.rooms.items()
                if room.remote and room.talk_id is not None]

    def wants(self, name: str) -> bool:
        """Whether frames of ``name`` from other replicas have anyone here to go to: the
        room has viewers and no speaker on this replica."""
        room = self.rooms.get(name)
        return room is not None and bool(room.viewers) and (room.speaker is None
                                                            or room.remote)

    def lease_lost(self, name: str, talk_id: str) -> None:
        """The bus found the room of this replica's talk owned by another replica: the
        speaker is told (its captions now reach only this replica's viewers)."""
        room = self.rooms.get(name)
        if room is not None and not room.remote and room.talk_id == talk_id \
                and room.on_lost is not None:
            room.on_lost()

    def forget_if_empty(self, name: str) -> None:
        """Drop a room made for a viewer that was then refused."""
        room = self.rooms.get(name)
        if room is not None and not room.viewers and (room.speaker is None or room.remote):
            del self.rooms[name]

    def _end_room(self, room: Room) -> None:
        room.end()
        if self.rooms.get(room.name) is room:
            del self.rooms[room.name]

    # -- viewers -------------------------------------------------------------------------
    def join(self, name: str, lang: str, *, max_viewers: int, max_per_room: int,
             queue_frames: int = VIEWER_QUEUE_FRAMES,
             max_finals: int = VIEWER_MAX_FINALS,
             talk_id: str | None = None) -> tuple[Viewer, list[dict[str, Any]]]:
        """A new viewer of ``lang`` in room ``name`` and the recent finals it missed
        (``TooManyViewersError`` past a bound). The room is created if it has no speaker
        yet: the viewer waits for the talk (``talk_id``: only for that one)."""
        if self.viewers >= max_viewers:
            raise TooManyViewersError(
                f"too many viewers on this server (limit {max_viewers}); retry later")
        room = self.rooms.get(name)
        if room is not None and room.speaker is not None and lang not in room.langs:
            raise LanguageNotInRoomError(not_in_room_message(name, lang, room.langs))
        if room is not None and room.viewer_count >= max_per_room:
            raise TooManyViewersError(
                f"too many viewers in this room (limit {max_per_room}); retry later")
        if room is None:
            room = self._new_room(name)
        viewer = Viewer(room, lang, ViewerQueue(queue_frames, max_finals), talk_id=talk_id)
        room.viewers.setdefault(lang, set()).add(viewer)
        self._count(+1)
        return viewer, room.recent_finals(lang)

    def leave(self, viewer: Viewer) -> None:
        """The viewer's connection ended; an empty room without a speaker is forgotten."""
        room = viewer.room
        viewers = room.viewers.get(viewer.lang)
        if viewers is None or viewer not in viewers:
            return
        viewers.discard(viewer)
        if not viewers:
            del room.viewers[viewer.lang]
        self._count(-1)
        # a room of a remote talk exists here only for its viewers
        if (room.speaker is None or room.remote) and not room.viewers \
                and self.rooms.get(room.name) is room:
            del self.rooms[room.name]

    def _new_room(self, name: str) -> Room:
        room = Room(name, recent_limit=self.recent_limit, on_drop=self.on_drop)
        self.rooms[name] = room
        return room

    def _count(self, delta: int) -> None:
        self.viewers += delta
        if self.on_viewers is not None:
            self.on_viewers(self.viewers)

