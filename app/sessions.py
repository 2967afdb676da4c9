"""Re-translation sessions: the previous translation of the current segment is the draft.

A session holds, per speaker stream, the current segment's latest source, the previous
translation's token ids and text, a revision counter and acceptance statistics. The store
is bounded: sessions idle longer than ``ttl_s`` expire and the least recently used one is
evicted past ``max_sessions``. A lost session only costs speed: the next update starts with
an empty draft and is still a correct translation.

Concurrency: each session has a busy flag. A second request for a session that is still
translating gets ``SessionBusyError`` (HTTP 409): re-translation updates of one stream are
ordered, and silently interleaving them would make the draft of one update depend on
which request won the race.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field


class SessionBusyError(RuntimeError):
    """The session is translating another update (HTTP 409)."""


def agreed_prefix(older: list[int], newer: list[int]) -> int:
    """Length of the common token prefix of two consecutive outputs of a segment.

    Local agreement, as in simultaneous MT: a prefix the model produced twice, from two
    different source prefixes, is evidence; the rest of the previous output was produced
    once and may be a guess from too little source. A small model's first guess from three
    words is often a hallucination that beta would otherwise keep for the whole sentence.
    """
    n = min(len(older), len(newer))
    i = 0
    while i < n and older[i] == newer[i]:
        i += 1
    return i


@dataclass
class SessionStats:
    updates: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    output_tokens: int = 0
    decode_ms: float = 0.0


@dataclass
class Session:
    session_id: str
    owner: str | None = None  # API key (hashed) that created it; others cannot see it
    source: str = ""
    previous_tokens: list[int] = field(default_factory=list)
    previous_text: str = ""
    previous_agreed: int = 0  # leading draft tokens the two latest outputs agreed on
    revision: int = 0  # revision of the current segment's latest translation
    segment: int = 0  # segments finished so far
    target_lang: str | None = None
    source_lang: str | None = None
    stats: SessionStats = field(default_factory=SessionStats)
    last_used: float = field(default_factory=time.monotonic)
    busy: bool = False

    def draft_for(self, target_lang: str, source_lang: str) -> list[int]:
        """The previous translation, unless the language pair changed (then it is no draft)."""
        if (target_lang, source_lang) != (self.target_lang, self.source_lang):
            return []
        return list(self.previous_tokens)

    def record(
        self, source: str, tokens: list[int], text: str, is_final: bool,
        target_lang: str, source_lang: str,
    ) -> int:
        """Store an update's translation; returns its revision. A final resets the draft."""
        self.revision += 1
        revision = self.revision
        self.target_lang, self.source_lang = target_lang, source_lang
        if is_final:
            self.source, self.previous_tokens, self.previous_text = "", [], ""
            self.previous_agreed = 0
            self.segment += 1
            self.revision = 0
        else:
            self.previous_agreed = agreed_prefix(self.previous_tokens, tokens)
            self.source, self.previous_tokens, self.previous_text = source, list(tokens), text
        return revision


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
        self._lock = threading.Lock()
        self.evicted = 0
        self.expired = 0

    def __len__(self) -> int:
        return len(self._sessions)

    @staticmethod
    def new_id() -> str:
        return "sess-" + uuid.uuid4().hex[:16]

    def acquire(self, session_id: str | None, owner: str | None = None) -> Session:
        """Get (or create) a session and mark it busy. Pair with ``release``.

        A session owned by another API key is treated as unknown: the caller gets a fresh,
        separate session under a key scoped to its owner, and never learns the other exists.
        """
        now = self._clock()
        with self._lock:
            self._expire(now)
            sid = session_id or self.new_id()
            key = self._key(sid, owner)
            session = self._sessions.get(key)
            if session is None:
                session = Session(session_id=sid, owner=owner)
                self._sessions[key] = session
                while len(self._sessions) > self.max_sessions:
                    victim_key, victim = next(iter(self._sessions.items()))
                    if victim.busy:  # never evict work in flight; move it to the back
                        self._sessions.move_to_end(victim_key)
                        if all(s.busy for s in self._sessions.values()):
                            break
                        continue
                    del self._sessions[victim_key]
                    self.evicted += 1
            elif session.busy:
                raise SessionBusyError(
                    f"session '{sid}' is still translating the previous update; "
                    "send updates of one session one at a time"
                )
            self._sessions.move_to_end(key)
            session.busy = True
            session.last_used = now
            return session

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
        self.expired += len(stale)
