"""A replica's room voice listeners: who listens to which room and language, one feed per
room and language, the peers' lives.

Each (room, language) with listeners here follows the room voice's live feed once
(``VoiceLive.follow``) and decodes it once (``AacDecoder``; a new talk starts a new
decoder, as its AAC stream is new); the PCM goes to every listener's track
(``ListenerTrack.feed``, which never waits). A listener admitted by a talk's own viewer
token hears only that talk; one admitted to the room (an API key, a room viewer token)
goes on with the room's next talk on the same connection.

Bounded: at most ``max_listeners`` at once on this replica (the route answers 503 past
it); a peer that never connects is closed after ``CONNECT_TIMEOUT_S``; one that fails or
closes is removed, and its room's feed stops with its last listener. A feed task that
ends by a fault is logged and its listeners are closed (their page reconnects), never
left in silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.live.listen.track import ListenerTrack
from app.live.peer import IceOptions, answer_offer, new_peer
from app.rooms.voice.aac import AacDecoder
from app.rooms.voice.live_feed import VoiceLive

log = logging.getLogger("livetrans.live")

CONNECT_TIMEOUT_S = 30.0


class TooManyListeners(RuntimeError):
    """This replica has ``max_listeners`` already."""


@dataclass(eq=False)
class Listener:
    id: str
    room: str
    lang: str
    talk: str | None  # only this talk (a talk's viewer token), else the room's every talk
    owner: str | None
    pc: Any
    track: ListenerTrack


@dataclass(eq=False)
class _Feed:
    listeners: set[Listener] = field(default_factory=set)
    task: asyncio.Task | None = None
    talk: str | None = None  # the talk being decoded
    decoder: AacDecoder | None = None


@dataclass(frozen=True)
class ListenerReport:
    """What the hub tells its observer (``/metrics``): listeners per language now, and
    what an ended listener skipped (pauses, speech) to stay near the live edge."""

    counts: dict[str, int]
    skipped_pause_s: float = 0.0
    skipped_speech_s: float = 0.0


class RoomListeners:
    def __init__(self, live: VoiceLive, max_listeners: int = 500,
                 observe: Callable[[ListenerReport], None] | None = None) -> None:
        self.live = live
        self.max_listeners = max_listeners
        self.observe = observe
        self.listeners: dict[str, Listener] = {}
        self.feeds: dict[tuple[str, str], _Feed] = {}
        self.closed = False

    def count(self, lang: str | None = None) -> int:
        return sum(1 for x in self.listeners.values() if lang is None or x.lang == lang)

    async def add(self, room: str, lang: str, talk: str | None, sdp: str, ice: IceOptions,
                  owner: str | None = None) -> tuple[Listener, str]:
        """A listener from its offer (checked by ``peer.check_offer``): it and the answer.
        ``OfferError``/``NoUdpPort`` as ``answer_offer`` raises them."""
        if self.closed or len(self.listeners) >= self.max_listeners:
            raise TooManyListeners
        track = ListenerTrack()
        pc = new_peer(ice)
        answer = await answer_offer(pc, sdp, ice, send=[track])
        listener = Listener(secrets.token_hex(16), room, lang, talk, owner, pc, track)
        if self.closed or len(self.listeners) >= self.max_listeners:
            await pc.close()
            raise TooManyListeners
        self.listeners[listener.id] = listener
        self._join(listener)
        self._report()

        @pc.on("connectionstatechange")
        async def changed() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self.remove(listener)

        loop = asyncio.get_running_loop()
        loop.call_later(CONNECT_TIMEOUT_S, self._check_connected, listener)
        return listener, answer

    def get(self, room: str, listener_id: str, owner: str | None) -> Listener | None:
        listener = self.listeners.get(listener_id)
        if listener is None or listener.room != room or listener.owner != owner:
            return None
        return listener

    def _check_connected(self, listener: Listener) -> None:
        if listener.id in self.listeners and listener.pc.connectionState != "connected":
            asyncio.get_running_loop().create_task(self.remove(listener))

    def _join(self, listener: Listener) -> None:
        key = (listener.room, listener.lang)
        feed = self.feeds.get(key)
        if feed is None:
            feed = self.feeds[key] = _Feed()
            feed.task = asyncio.get_running_loop().create_task(self._follow(key, feed))
            feed.task.add_done_callback(lambda task: self._feed_ended(key, feed, task))
        feed.listeners.add(listener)

    async def _follow(self, key: tuple[str, str], feed: _Feed) -> None:
        async for item in self.live.follow(*key):
            if item.talk != feed.talk or feed.decoder is None:
                feed.talk, feed.decoder = item.talk, AacDecoder()
            pcm = feed.decoder.decode(item.piece.audio)
            if item.piece.last:
                feed.decoder = None  # the talk's stream ended; a next one starts afresh
            for listener in feed.listeners:
                if listener.talk is None or listener.talk == item.talk:
                    listener.track.feed(pcm)

    def _feed_ended(self, key: tuple[str, str], feed: _Feed, task: asyncio.Task) -> None:
        if self.feeds.get(key) is feed:
            del self.feeds[key]
        if task.cancelled():
            return
        crash = task.exception()
        log.error("room listeners: the %s feed of a room stopped (%s); its listeners are "
                  "closed", key[1], type(crash).__name__ if crash else "ended",
                  exc_info=crash)
        for listener in list(feed.listeners):
            asyncio.get_running_loop().create_task(self.remove(listener))

    async def remove(self, listener: Listener) -> None:
        """End a listener (idempotent): its peer closed, its feed left."""
        if self.listeners.pop(listener.id, None) is None:
            return
        key = (listener.room, listener.lang)
        feed = self.feeds.get(key)
        if feed is not None:
            feed.listeners.discard(listener)
            if not feed.listeners and feed.task is not None:
                self.feeds.pop(key, None)
                feed.task.cancel()
        track = listener.track
        log.debug("room listener ended: %.1f s heard, %.1f s of pauses skipped, %.1f s of "
                  "speech dropped", track.heard_s, track.skipped_pause_s, track.skipped_s)
        track.stop()
        self._report(track.skipped_pause_s, track.skipped_s)
        with contextlib.suppress(Exception):
            await listener.pc.close()

    def _report(self, pause_s: float = 0.0, speech_s: float = 0.0) -> None:
        if self.observe is not None:
            counts = Counter(x.lang for x in self.listeners.values())
            self.observe(ListenerReport(dict(counts), pause_s, speech_s))

    async def close(self) -> None:
        """Shutdown: every listener ends."""
        self.closed = True
        await asyncio.gather(*(self.remove(x) for x in list(self.listeners.values())))
        closer = getattr(self.live, "close", None)
        if closer is not None:
            await closer()
