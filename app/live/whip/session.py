"""WHIP ingest (RFC 9725): a WebRTC publisher, such as OBS, speaking into a room.

The publisher POSTs an SDP offer; the server answers it with aiortc (a Python WebRTC
stack), receives the Opus audio track, decodes it to PCM and speaks into the room exactly
as a ``/v1/live`` audio speaker would: the session drives a ``LiveConnection``
(``app.live.connection.serve``) through a ``WhipSocket``, a socket with no network behind
it, whose incoming frames are the ``start`` the route composes, the track's PCM and, at
the end, ``stop``. So admission, rooms, the recogniser, fan-out, viewers, the bus and
the transcript are the same code as for any speaker, and a final is answered the same
way. The frames the server sends back (``ready``, captions, errors, ``done``) are read
for the session's state: the route answers the POST once ``ready`` (201) or a refusal
(its error, as HTTP) arrives.

What aiortc sees of the offer, and the answer's shape, are ``app.live.whip.sdp``'s: only
the sound is answered, every other section is declined in place (so OBS's AV1 or HEVC
video costs nothing and refuses nothing). ICE uses the host's own addresses; STUN or TURN
servers only when the operator names them (``serve --whip-ice-server``); in a container,
``--whip-udp-ports`` bounds its sockets to the published range (``app.live.whip.ice``) and
``--whip-public-ip`` is the address the answer gives. The session ends with ``DELETE`` on
its resource (by the API key that published it), when the peer connection fails or
closes, or when the track ends: each of these stops the talk as ``stop`` does (the segment
in progress becomes a final). A talk that does not get ready in time is cancelled, so it
cannot claim the room after its publisher was told 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.live.peer import (
    IceOptions,
    NoUdpPort,
    answer_offer,
    discard,
    new_peer,
)
from app.supervision import wait_event

log = logging.getLogger("livetrans.whip")

PCM_RATE = 48_000  # Opus decodes at 48 kHz; the live socket resamples to the recogniser's
FRAME_S = 0.2  # PCM per frame handed to the live connection
QUEUE_FRAMES = 50  # frames waiting for the live connection (10 s); more are dropped
READY_WAIT_S = 60.0  # the speech model may load on the first audio speaker
STOP_WAIT_S = 120.0  # DELETE waits this long for the last final to be answered
CANCEL_WAIT_S = 30.0  # a refused talk's cleanup (room release) gets this long
CANCEL_AGAIN_S = 0.2  # a refused talk still running this long is cancelled again


@dataclass
class Refusal:
    """The live connection refused the session: its error frame."""

    code: str
    message: str
    param: str | None = None


class WhipSocket:
    """The live connection's socket for a WHIP session: frames in from a queue, frames out
    read for the session's state (``SpeakerSocket`` of ``app.live.connection``)."""

    def __init__(self, start: dict[str, Any],
                 on_dropped: Callable[[float], None] | None = None) -> None:
        self.on_dropped = on_dropped  # seconds of audio dropped (the server's metrics)
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.audio_frames = 0  # audio frames waiting in ``incoming``
        self.dropped_s = 0.0  # audio dropped because the connection did not keep up
        self.received_s = 0.0  # audio the publisher's track delivered, dropped or not
        self.ready = asyncio.Event()  # 'ready' or a refusal arrived
        self.refusal: Refusal | None = None
        self.info: dict[str, Any] = {}  # the 'ready' frame
        self.done = asyncio.Event()  # 'done' was sent, or the socket closed
        self.errors = 0
        self._stopped = False
        self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(start)})

    # -- what the live connection calls ------------------------------------------------------
    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        message = await self.incoming.get()
        if message.get("bytes") is not None:
            self.audio_frames -= 1
        return message

    async def send_text(self, data: str) -> None:
        frame = json.loads(data)
        kind = frame.get("type")
        if kind == "ready":
            self.info = frame
            self.ready.set()
        elif kind == "error":
            self.errors += 1
            if not self.ready.is_set():
                self.refusal = Refusal(str(frame.get("code")), str(frame.get("message")),
                                       frame.get("param"))
                self.ready.set()
        elif kind == "done":
            self.done.set()

    async def send_bytes(self, data: bytes) -> None:
        """A voice's audio: a WHIP publisher asks for no voices, nobody would hear it."""
        return None

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        if not self.ready.is_set():
            self.refusal = self.refusal or Refusal("closed", reason or "the session closed")
            self.ready.set()
        self.done.set()
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})

    # -- what the session calls --------------------------------------------------------------
    def push_audio(self, pcm: bytes) -> None:
        """One frame of mono s16le PCM at ``PCM_RATE``; dropped (and counted) when the
        connection has ``QUEUE_FRAMES`` waiting, so a stalled talk holds bounded memory."""
        if self._stopped:
            return
        seconds = len(pcm) / 2 / PCM_RATE
        self.received_s += seconds
        if self.audio_frames >= QUEUE_FRAMES:
            self.dropped_s += seconds
            if self.on_dropped is not None:
                self.on_dropped(seconds)
            return
        self.audio_frames += 1
        self.incoming.put_nowait({"type": "websocket.receive", "bytes": pcm})

    def push_stop(self) -> None:
        """The talk ends: the connection recognises what is left and says 'done'."""
        if not self._stopped:
            self._stopped = True
            self.incoming.put_nowait({"type": "websocket.receive",
                                      "text": json.dumps({"type": "stop"})})


class WhipSession:
    """One publisher: its peer connection, its socket and the live connection's task."""

    def __init__(self, room: str, socket: WhipSocket, pc: Any,
                 owner: str | None = None) -> None:
        self.id = secrets.token_urlsafe(16)
        self.room = room
        self.owner = owner  # the publishing API key's owner id: only it may DELETE
        self.socket = socket
        self.pc = pc
        self.task: asyncio.Task | None = None  # the live connection (``serve``)
        self.pump: asyncio.Task | None = None  # the audio track into the socket
        self.drains: list[asyncio.Task] = []  # other tracks, read and dropped

    async def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """End the talk as ``stop`` does, wait for 'done' (bounded), close the peer."""
        self.socket.push_stop()
        try:
            await asyncio.wait_for(self.socket.done.wait(), wait_s)
        except TimeoutError:
            log.warning("a WHIP session's talk did not end within %.0f s", wait_s)
        self.cancel_tasks()
        await self.pc.close()

    def cancel_tasks(self) -> None:
        for task in [self.pump, *self.drains]:
            if task is not None:
                task.cancel()


async def pump_audio(track: Any, socket: WhipSocket) -> None:
    """The track's frames, decoded by aiortc, as mono s16le PCM frames of ``FRAME_S``,
    until the track ends; then the talk stops."""
    import av
    from aiortc.mediastreams import MediaStreamError

    resampler = av.AudioResampler(format="s16", layout="mono", rate=PCM_RATE)
    chunk = int(FRAME_S * PCM_RATE) * 2
    pending = bytearray()
    try:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                break
            for out in resampler.resample(frame):
                pending += out.to_ndarray().tobytes()
            while len(pending) >= chunk:
                socket.push_audio(bytes(pending[:chunk]))
                del pending[:chunk]
        if pending:
            socket.push_audio(bytes(pending))
    finally:
        socket.push_stop()


class WhipSessions:
    """The server's WHIP sessions by resource id (each one a speaker, so already bounded
    by ``--max-live-sessions``)."""

    def __init__(self, on_dropped: Callable[[float], None] | None = None,
                 ready_wait_s: float = READY_WAIT_S) -> None:
        self.sessions: dict[str, WhipSession] = {}
        # audio a publisher sent faster than its talk took it in (seconds; /metrics)
        self.on_dropped = on_dropped
        self.ready_wait_s = ready_wait_s

    async def open(self, room: str, sdp: str, start: dict[str, Any],
                   serve: Callable[[WhipSocket], Awaitable[None]],
                   ice: IceOptions = IceOptions(),
                   owner: str | None = None) -> tuple[WhipSession, str]:
        """Answer ``sdp`` and start the talk: (session, SDP answer); ``OfferError`` for an
        offer aiortc cannot answer; ``SessionRefused`` when the live connection refused
        ``start``, did not get ready in time (its talk cancelled), or no UDP port of
        ``ice.ports`` was free."""
        socket = WhipSocket(start, self.on_dropped)
        pc = new_peer(ice)
        session = WhipSession(room, socket, pc, owner)

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "audio" and session.pump is None:
                session.pump = asyncio.ensure_future(pump_audio(track, socket))
            else:  # a second audio section: read and dropped
                session.drains.append(asyncio.ensure_future(discard(track)))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                socket.push_stop()

        try:
            answer = await answer_offer(pc, sdp, ice)
        except NoUdpPort as exc:
            raise SessionRefused(Refusal("no_udp_port", str(exc))) from None
        session.task = asyncio.ensure_future(serve(socket))
        try:
            if not await wait_event(socket.ready, self.ready_wait_s):  # keeps a cancel
                socket.refusal = Refusal("not_ready", "the talk did not start in time; retry")
        except asyncio.CancelledError:  # the request itself ends (shutdown): so does its talk
            await _abandon(session)
            raise
        if socket.refusal is not None:
            await _abandon(session)
            raise SessionRefused(socket.refusal)
        self.sessions[session.id] = session
        session.task.add_done_callback(lambda _t: self._ended(session))
        return session, answer

    def _ended(self, session: WhipSession) -> None:
        self.sessions.pop(session.id, None)
        session.cancel_tasks()
        asyncio.ensure_future(session.pc.close())

    def get(self, room: str, resource: str, owner: str | None = None) -> WhipSession | None:
        """The session at this address, published by ``owner`` (None: the server has no
        API keys); another key's session is not found, as if it did not exist."""
        session = self.sessions.get(resource)
        if session is None or session.room != room or session.owner != owner:
            return None
        return session

    async def close(self, session: WhipSession) -> None:
        self.sessions.pop(session.id, None)
        await session.stop()


async def _abandon(session: WhipSession) -> None:
    """A session that will not be answered: its talk cancelled (ended before this
    returns, so it cannot claim the room later), its tracks' tasks and peer closed."""
    session.socket.push_stop()
    if session.task is not None:
        await cancel_talk(session.task)
    session.cancel_tasks()
    await session.pc.close()


async def cancel_talk(task: asyncio.Task, patience_s: float = CANCEL_WAIT_S) -> bool:
    """Cancel a refused talk and wait until it has ended (its cleanup frees the room),
    cancelling again should a cancel be lost (``app.supervision``'s module doc); whether
    it ended within ``patience_s`` (else logged and left)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience_s
    while not task.done():
        left = deadline - loop.time()
        if left <= 0:
            log.error("a refused WHIP talk did not end within %.0f s of being cancelled",
                      patience_s)
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(CANCEL_AGAIN_S, left))
    if not task.cancelled():
        task.exception()  # retrieved: the talk's own error frame said what went wrong
    return True


class SessionRefused(RuntimeError):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
