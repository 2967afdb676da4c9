"""Re-translation sessions: the previous translation of the current segment is the draft.

A session holds, per speaker stream, the current segment's draft (the previous translation's
token ids and the prefix its two latest outputs agreed on), a revision counter and what
orders updates. Its lifecycle is three methods: ``plan_draft`` (what the next update is
verified against), ``commit`` (an applied update's output becomes the next draft; a final
ends the segment) and ``start_segment``. The store is bounded: sessions idle longer than
``ttl_s`` expire and the least recently used one is evicted past ``max_sessions``. A lost
session only costs speed: the next update starts with an empty draft and is still a correct
translation.

Concurrency: each session has a busy flag. A second request for a session that is still
translating gets ``SessionBusyError`` (HTTP 409): re-translation updates of one stream are
ordered, and silently interleaving them would make the draft of one update depend on
which request won the race. A store whose every slot holds a busy session cannot make room
for a new one: ``SessionStoreFullError`` (HTTP 429), never an eviction of work in flight.

Order: a session never moves backwards. ``Session.check_newer`` refuses (``StaleUpdateError``,
HTTP 409) an update older than the newest one applied: by the client's ``seq`` when it sends
one, otherwise a partial whose source is the newest applied source or a prefix of it (a
retried or reordered update of a growing transcript; see ``check_newer`` for why).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.prefix import common_prefix

# Session ids travel in logs, headers and the gateway's hash key: one rule for
# the body field and the X-Session-ID header alike.
SESSION_ID_MAX_CHARS = 128
# finals a session remembers for ``context`` (the most a request may ask for)
MAX_CONTEXT = 8
# 1-128 characters of ``A-Z a-z 0-9 . _ : -`` (the schemas' ``SessionId``, app/api)
SESSION_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


class SessionBusyError(RuntimeError):
    """The session is translating another update (HTTP 409)."""


class SessionStoreFullError(RuntimeError):
    """Every session slot holds a session with work in flight: no room for a new one.

    Raised by ``SessionStore.acquire`` for a new session id (HTTP 429; a WebSocket ``start``
    gets an error frame). Busy sessions are never evicted, so the caller must wait until one
    frees rather than take another's slot.
    """


class StaleUpdateError(RuntimeError):
    """The update is older than the session's newest (a retry or a reordering): HTTP 409."""


def agreed_prefix(older: list[int], newer: list[int]) -> int:
    """Length of the common token prefix of two consecutive outputs of a segment.

    Local agreement, as in simultaneous MT: a prefix the model produced twice, from two
    different source prefixes, is evidence; the rest of the previous output was produced
    once and may be a guess from too little source. A small model's first guess from three
    words is often a hallucination that beta would otherwise keep for the whole sentence.
    """
    return common_prefix(older, newer)


@dataclass(frozen=True)
class DraftPlan:
    """What the next update of a session is verified against.

    ``tokens`` is the session's previous translation of the current segment (empty when
    there is none: a new segment, another language pair, or an output refused as a draft);
    ``agreed`` is how many of its leading tokens the two latest outputs agreed on (the
    biased prefix under ``bias_scope="agreed"``).
    """

    tokens: list[int] = field(default_factory=list)
    agreed: int = 0


@dataclass
class Session:
    """One speaker stream: the draft lifecycle of its current segment, and update order.

    Only the methods below change the draft (``plan_draft`` reads it, ``commit`` replaces
    it, ``start_segment`` empties it), so the HTTP route, the WebSocket and the eval harness
    run one lifecycle instead of each keeping its own copy of the fields.
    """

    session_id: str
    previous_tokens: list[int] = field(default_factory=list)  # the next update's draft
    previous_agreed: int = 0  # leading draft tokens the two latest outputs agreed on
    revision: int = 0  # revision of the current segment's latest translation
    # The client's name for the current segment (the WebSocket's ``segment``); None over
    # HTTP, where only a final ends a segment.
    segment_label: int | None = None
    target_lang: str | None = None  # the language pair the draft was translated for
    source_lang: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False
    # Order (``check_newer``): the newest applied source (partial or final; it survives the
    # final, so a stale partial cannot start the next segment) and the client's newest seq.
    newest_source: str = ""
    newest_seq: int | None = None
    # The talk so far, for ``context``: (source, translation) of the latest finals of the
    # current language pair, oldest first, at most ``MAX_CONTEXT`` of them.
    finals: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=MAX_CONTEXT))
    # The current segment's final as translated at the speaker's pause, for the final to
    # take (``app.translation.pause.PauseTranslation``; opaque here); one at most.
    pause_translation: object | None = None

    def check_newer(self, source: str, is_final: bool, seq: int | None = None) -> None:
        """Refuse an update older than the newest applied one (``StaleUpdateError``).

        With ``seq`` (the client's counter, strictly increasing within the session) the
        order is exact: ``seq`` must exceed every seq applied so far. Without it the server
        can only judge by the text: a partial that equals the newest applied source, or is a
        prefix of it, is what a retried or late request of a growing transcript looks like
        ("Ladies and" arriving after "Ladies and gentlemen"), and applying it would make an
        older hypothesis the session's newest revision and its draft. A genuine ASR
        retraction that only drops a tail looks the same and is refused too; it costs
        nothing that the next growing partial or the final does not restore, and a client
        that needs retractions applied sends ``seq``. Finals are never judged by text (a
        final commonly repeats its last partial verbatim).
        """
        if seq is not None:
            if self.newest_seq is not None and seq <= self.newest_seq:
                raise StaleUpdateError(
                    f"update seq {seq} is not newer than the session's newest applied seq "
                    f"{self.newest_seq}; it was not applied")
            return
        if not is_final and self.newest_source and self.newest_source.startswith(source):
            raise StaleUpdateError(
                "this partial repeats or shortens the session's newest source, so it is a "
                "retried or late update; it was not applied (send 'seq' to order updates "
                "explicitly)")

    def applied(self, seq: int | None) -> None:
        """Note that the update carrying ``seq`` was applied (call while holding the session)."""
        if seq is not None:
            self.newest_seq = seq if self.newest_seq is None else max(self.newest_seq, seq)

    # -- draft lifecycle -------------------------------------------------------------------
    def plan_draft(self, target_lang: str, source_lang: str) -> DraftPlan:
        """The draft the next update is verified against: the previous translation of the
        segment, unless the language pair changed (a translation into another language is
        no draft)."""
        if (target_lang, source_lang) != (self.target_lang, self.source_lang):
            return DraftPlan()
        return DraftPlan(list(self.previous_tokens), self.previous_agreed)

    def commit(
        self, source: str, draft: list[int], is_final: bool, target_lang: str,
        source_lang: str, seq: int | None = None, text: str | None = None,
    ) -> int:
        """Apply a translated update; returns its revision within the segment.

        ``draft`` is what the translator made the output into for the next update (the
        output's tokens, or empty when it was refused as a draft). A partial's draft becomes
        the session's, with the prefix it shares with the draft it replaces as the agreed
        part; a final ends the segment, and the next update starts with an empty draft.
        Commit only what was applied: a cancelled update changes neither draft nor order.
        """
        self.revision += 1
        revision = self.revision
        self.newest_source = source
        self.applied(seq)
        if (target_lang, source_lang) != (self.target_lang, self.source_lang):
            self.finals.clear()  # another language pair's talk is no context
        self.target_lang, self.source_lang = target_lang, source_lang
        if is_final:
            if text:  # a final's ``text`` (the caption) joins the talk's context
                self.finals.append((source, text))
            self.start_segment()
        else:
            self.previous_agreed = agreed_prefix(self.previous_tokens, draft)
            self.previous_tokens = list(draft)
        return revision

    def context(self, target_lang: str, source_lang: str, n: int) -> list[tuple[str, str]]:
        """The latest ``n`` finals of this language pair, oldest first."""
        if n <= 0 or (target_lang, source_lang) != (self.target_lang, self.source_lang):
            return []
        return list(self.finals)[-n:]

    def start_segment(self, label: int | None = None) -> None:
        """Start a new segment: an empty draft and revision 0.

        The previous segment's translation is no draft for other source text, whether or not
        a final closed that segment (a WebSocket client may move on without one).
        """
        self.previous_tokens, self.previous_agreed = [], 0
        self.revision = 0
        self.segment_label = label
        self.pause_translation = None

    def enter_segment(self, label: int) -> None:
        """Make the client's segment ``label`` the current one; another label than the
        current segment's starts a new segment (``start_segment``)."""
        if label != self.segment_label:
            self.start_segment(label)


class SessionStore:
    """TTL + LRU bounded map of sessions, safe to use from the event loop and threads."""

    def __init__(
        self, max_sessions: int = 1000, ttl_s: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()  # a leaf lock (app/engine/__init__.py)

    def __len__(self) -> int:
        return len(self._sessions)

    @staticmethod
    def new_id() -> str:
        return "sess-" + uuid.uuid4().hex[:16]

    def acquire(self, session_id: str | None, owner: str | None = None) -> Session:
        """Get (or create) a session and mark it busy. Pair with ``release``.

        A session owned by another API key is treated as unknown: the caller gets a fresh,
        separate session under a key scoped to its owner, and never learns the other exists.
        A new session takes the slot of the least recently used idle one when the store is
        full; when every session is busy, ``SessionStoreFullError`` (nothing is created).
        """
        now = self._clock()
        with self._lock:
            self._expire(now)
            sid = session_id or self.new_id()
            key = self._key(sid, owner)
            session = self._sessions.get(key)
            if session is None:
                while len(self._sessions) >= self.max_sessions:
                    self._evict_one_idle()
                session = Session(session_id=sid)
                self._sessions[key] = session
            elif session.busy:
                raise SessionBusyError(
                    f"session '{sid}' is still translating the previous update; "
                    "send updates of one session one at a time"
                )
            self._sessions.move_to_end(key)
            session.busy = True
            session.last_used = now
            return session

    def _evict_one_idle(self) -> None:
        """Drop the least recently used session that is not busy (lock held)."""
        for victim_key, victim in self._sessions.items():
            if not victim.busy:
                del self._sessions[victim_key]
                return
        raise SessionStoreFullError(
            f"all {self.max_sessions} sessions are busy translating; retry when one finishes")

    async def acquire_when_free(self, session_id: str, owner: str | None = None,
                                timeout: float = 60.0, poll_s: float = 0.01) -> Session:
        """``acquire``, waiting while the session is busy (finals must not be refused)."""
        import asyncio

        deadline = self._clock() + timeout
        while True:
            try:
                return self.acquire(session_id, owner)
            except SessionBusyError:
                if self._clock() >= deadline:
                    raise
                await asyncio.sleep(poll_s)

    def release(self, session: Session) -> None:
        with self._lock:
            session.busy = False
            session.last_used = self._clock()

    def get(self, session_id: str, owner: str | None = None) -> Session | None:
        with self._lock:
            self._expire(self._clock())
            return self._sessions.get(self._key(session_id, owner))

    def drop(self, session_id: str, owner: str | None = None) -> None:
        with self._lock:
            self._sessions.pop(self._key(session_id, owner), None)

    @staticmethod
    def _key(session_id: str, owner: str | None) -> str:
        return f"{owner or ''}\x00{session_id}"

    def _expire(self, now: float) -> None:
        stale = [
            k for k, s in self._sessions.items()
            if not s.busy and now - s.last_used > self.ttl_s
        ]
        for k in stale:
            del self._sessions[k]
