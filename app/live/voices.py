"""A live connection's voices (API.md "Voices"): its committed text spoken, as binary
frames on the speaker's own socket.

``start``'s ``"voices"`` names some of its target languages. Each gets a ``VoiceStream``
(``app.voice.stream``) from the server's registry, listening to the connection's commits;
a task per voice sends its audio as binary frames through the publisher's send lock, so
audio and JSON frames interleave whole. A binary frame is a 2-byte header (the voice's
``index`` in ``ready``'s ``voices``, then 0) and PCM16 little-endian mono at that voice's
``sample_rate``: the PCM starts at an even offset (a browser's ``Int16Array(buf, 2)``).

When the talk is in a room, each voice is also the room's (``app.rooms.voice``): its
speech is laid on the talk's clock and published as HLS audio segments that every
replica serves (``GET /v1/rooms/{room}/voice/{lang}.m3u8``), and in short live pieces to
its WebRTC listeners on any replica (``app.live.listen``), spoken once, here.

A language with no voice on this server is told once (``voice_unavailable``) and its
captions go on; committed text a voice will not speak (overrun, an engine failure, the
talk ended first) is told as ``voice_dropped``, never lost silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from app.live.frames import log_unexpected
from app.live.publisher import CaptionPublisher, ConnectionGone
from app.rooms.voice.segments import VoiceSegments
from app.rooms.voice.track import RoomVoiceTrack, VoicePiece, VoiceSegment
from app.voice.base import VoiceUnavailable
from app.voice.registry import VoiceRegistry
from app.voice.stream import VoiceChunk, VoiceLoss, VoiceStream

log = logging.getLogger("livetrans.live")

PIECE_S = 0.5  # the longest audio in one binary frame: a client starts playing early
FLUSH_S = 30.0  # what the voices still have to say when the talk ends, at most this long
SPEAKER_QUEUE_S = 30.0  # the speaker's own copy waiting for its socket, at most
_LOSSES = {"overrun": "the voice fell too far behind the speaker",
           "failed": "the voice could not speak it",
           "closed": "the talk ended before it was spoken"}


def frame_header(index: int) -> bytes:
    """The 2 bytes before a voice's PCM in a binary frame."""
    return bytes((index, 0))


class ConnectionVoices:
    """The voices of one connection, from ``start`` until the talk ends."""

    def __init__(self, publisher: CaptionPublisher, registry: VoiceRegistry | None,
                 segments: VoiceSegments | None = None, segment_s: float = 4.0) -> None:
        self.publisher = publisher
        self.registry = registry
        self.segments = segments  # the room voices' store (None: no room voices)
        self.segment_s = segment_s
        self.streams: list[VoiceStream] = []
        self.tracks: dict[int, RoomVoiceTrack] = {}  # per stream index, in a room
        self.tasks: list[asyncio.Task] = []
        self._reports: set[asyncio.Task] = set()
        self.speaker_copies: list[SpeakerCopy] = []
        self.langs: list[str] = []  # per stream index
        self.muted: set[str] = set()

    async def open(self, langs: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        """A voice per language that has one: (``ready``'s ``voices``, the languages
        without). Resolving a voice may start a process: off the event loop."""
        described: list[dict[str, Any]] = []
        missing: list[str] = []
        for lang in langs:
            if self.registry is None:
                missing.append(lang)
                continue
            try:
                synth = await asyncio.to_thread(self.registry.resolve, lang)
            except VoiceUnavailable:
                missing.append(lang)
                continue
            index = len(self.streams)
            stream = VoiceStream(synth, executor=self.registry.executor,
                                 catch_up=self.registry.catch_up, on_loss=self._report)
            self.streams.append(stream)
            self.langs.append(lang)
            self.publisher.commit_listeners.append(stream)
            self._room_track(index, lang)
            info = synth.info
            described.append({"index": index, "lang": lang, "engine": info.engine,
                              "voice": info.voice, "format": "pcm16",
                              "sample_rate": info.sample_rate, "channels": 1})
        return described, missing

    def _room_track(self, index: int, lang: str) -> None:
        """The room's voice in ``lang``, when the talk is in a room."""
        talk = self.publisher.talk
        room = talk.room if talk is not None else None
        store = self.segments
        if talk is None or room is None or store is None:
            return
        name, talk_id = room.name, str(room.talk_id)

        async def publish(segment: VoiceSegment) -> None:
            await store.put(name, talk_id, lang, segment)

        async def ended(count: int) -> None:
            await store.end(name, talk_id, lang, count)

        async def piece(piece: VoicePiece) -> None:
            await store.live.put(name, lang, talk_id, piece)

        self.tracks[index] = RoomVoiceTrack(self.segment_s, publish, talk.clock, ended,
                                            on_piece=piece)

    def start(self) -> None:
        """Send each voice's audio from now on (after ``ready``: it describes them)."""
        for track in self.tracks.values():
            track.start()
        for index, stream in enumerate(self.streams):
            task = asyncio.create_task(self._send(index, stream))
            task.add_done_callback(_settle)
            self.tasks.append(task)

    async def _send(self, index: int, stream: VoiceStream) -> None:
        """Each chunk to the room's track at once, and to the speaker's socket through a
        queue of its own (``SpeakerCopy``): a speaker slow to read never delays the room."""
        track = self.tracks.get(index)
        copy = SpeakerCopy()
        self.speaker_copies.append(copy)
        deliver = asyncio.create_task(self._deliver(frame_header(index), copy, stream))
        try:
            async for chunk in stream.chunks():
                if track is not None:
                    track.add(chunk.pcm, chunk.sample_rate)
                if not deliver.done():
                    copy.put(pieces(chunk), chunk.sample_rate)
        except asyncio.CancelledError:  # aborted: the speaker's copy stops too
            deliver.cancel()
            raise
        finally:
            copy.queue.put_nowait(None)  # the end: what is queued is sent first
            try:
                await asyncio.wait({deliver})
            finally:
                deliver.cancel()

    async def _deliver(self, header: bytes, copy: SpeakerCopy, stream: VoiceStream) -> None:
        while (piece := await copy.queue.get()) is not None:
            copy.queued -= len(piece)
            try:
                await self.publisher.send_bytes(header + piece)
            except ConnectionGone:
                stream.abort()
                return

    async def switch(self, msg: dict[str, Any]) -> None:
        """``{"type": "voice", "lang": L, "on": false|true}``: the operator turns one of the
        talk's voices off and on again. Off, its commits are not spoken (by the speaker's
        copy and the room's alike: the room hears silence in that language, its players
        and listeners stay connected); on again, it speaks from the next commit. Answered
        with the same frame as the voice now stands, or an error frame."""
        lang, on = msg.get("lang"), msg.get("on")
        if not isinstance(lang, str) or lang not in self.langs:
            await self.publisher.error(
                "unknown_voice", "'voice' names one of the talk's voices ('lang': one of "
                f"{', '.join(self.langs) or 'none: start named no voices'})", param="lang")
            return
        if not isinstance(on, bool):
            await self.publisher.error("invalid_message", "'voice' needs 'on': true or false",
                                       param="on")
            return
        stream = self.streams[self.langs.index(lang)]
        listeners = self.publisher.commit_listeners
        if on and lang in self.muted:
            self.muted.discard(lang)
            listeners.append(stream)
        elif not on and lang not in self.muted:
            self.muted.add(lang)
            listeners[:] = [x for x in listeners if x is not stream]
        await self.publisher.send({"type": "voice", "lang": lang, "on": on})

    def _report(self, loss: VoiceLoss) -> None:
        """A voice's loss, told to the speaker (``on_loss`` returns at once: a task)."""
        async def tell() -> None:
            with contextlib.suppress(ConnectionGone):
                await self.publisher.error(
                    "voice_dropped", f"{loss.phrases} committed phrase(s) ({loss.chars} "
                    f"characters) will not be heard: {_LOSSES.get(loss.reason, loss.reason)}",
                    lang=loss.lang)

        task = asyncio.get_running_loop().create_task(tell())
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)

    async def finish(self, timeout_s: float = FLUSH_S) -> None:
        """The talk ended: what was committed is spoken and sent (within ``timeout_s``;
        what is left then is reported), before the connection's ``done``."""
        for stream in self.streams:
            self.publisher.commit_listeners[:] = [
                x for x in self.publisher.commit_listeners if x is not stream]
        if not self.streams:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for stream in self.streams:
            await stream.close(max(0.0, deadline - loop.time()))
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=max(0.0, deadline - loop.time()))
        for track in self.tracks.values():  # the room hears the rest, then the end
            try:
                await track.finish()
            except Exception as exc:  # noqa: BLE001 - the room voice's, not the talk's
                log_unexpected(log, exc, "room voice")
        self.abort()
        if self._reports:
            await asyncio.wait(set(self._reports), timeout=1.0)

    def abort(self) -> None:
        """The connection is gone (or out of time): stop every voice now."""
        for stream in self.streams:
            stream.abort()
        for track in self.tracks.values():
            track.abort()
        for task in self.tasks:
            if not task.done():
                task.cancel()


class SpeakerCopy:
    """One voice's audio waiting for the speaker's socket, at most ``SPEAKER_QUEUE_S``:
    past it the oldest goes (counted in ``dropped_s``); the room's voice is untouched."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.queued = 0  # bytes waiting
        self.dropped_s = 0.0

    def put(self, audio: list[bytes], rate: int) -> None:
        for piece in audio:
            self.queue.put_nowait(piece)
            self.queued += len(piece)
        limit = int(SPEAKER_QUEUE_S * rate) * 2
        while self.queued > limit and self.queue.qsize() > 1:
            gone = self.queue.get_nowait()
            if gone is not None:
                self.queued -= len(gone)
                self.dropped_s += len(gone) / 2 / rate


def pieces(chunk: VoiceChunk) -> list[bytes]:
    """The chunk's PCM in pieces of at most ``PIECE_S`` (whole samples)."""
    size = int(PIECE_S * chunk.sample_rate) * 2
    return [chunk.pcm[i:i + size] for i in range(0, len(chunk.pcm), size)]


def _settle(task: asyncio.Task) -> None:
    if task.cancelled():
        return
    crash = task.exception()
    if crash is not None:
        log_unexpected(log, crash, "live voice")
