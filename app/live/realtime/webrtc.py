"""OpenAI's realtime translation over WebRTC: the transport its guide gives browsers.

    POST /v1/realtime/translations/calls     Content-Type: application/sdp
    Authorization: Bearer ek_...             (a client secret, or an API key with ?model=)
    -> 201 Created, the SDP answer, Location: /v1/realtime/translations/calls/<id>

The browser offers its microphone as an Opus track and a data channel (OpenAI's examples
name it ``oai-events``). The server answers with aiortc, the stack WHIP ingest uses
(``app.live.whip.sdp`` shapes the offer: sound and data channels kept, video declined),
and runs the same ``RealtimeSession`` as the WebSocket route, with three differences of
transport only:

* the microphone's frames, decoded and resampled to 24 kHz PCM16, are appended to the
  session as a WebSocket client's base64 appends are (``pump_microphone``);
* the session's events go out on the data channel, and the client's events
  (``session.update``, ``session.close``) come in on it (``EventChannel``); an offer
  without a data channel is a call of speech alone (its events are not sent);
* the translated speech is a remote audio track (``speech_track.SpeechTrack``), not
  ``session.output_audio.delta`` events.

The call ends when the session does (``session.close`` → ``session.closed``, its expiry,
a shutdown), or when the peer connection fails or closes, or the data channel closes:
each of these is the client leaving, and the session's legs end as for a vanished
speaker. Everything held per call is bounded: the client's events waiting for the session
(``MAX_INBOX``), what the data channel buffers for a client that does not read
(``MAX_CHANNEL_BUFFER``), the speech the track holds, and the number of calls.

aiortc is imported only when a call is made, so the server runs without the speech extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from app.live.frames import log_unexpected
from app.live.peer import IceOptions, NoUdpPort, answer_offer, discard, new_peer
from app.live.realtime import events
from app.live.realtime.audio_buffer import SAMPLE_RATE
from app.live.realtime.session import ClientGone, RealtimeSession
from app.live.whip.sdp import Description

log = logging.getLogger("livetrans.realtime")

CHANNEL_WAIT_S = 30.0  # ICE, DTLS and SCTP come up before the first event can go out
MAX_INBOX = 256  # client events waiting for the session
MAX_CHANNEL_BUFFER = 4 * 1024 * 1024  # bytes queued for a client that does not read
CLOSE_WAIT_S = 2.0  # the last events' delivery before the peer connection closes

Send = Callable[[str], Awaitable[None]]


class CallRefused(RuntimeError):
    """A call the server will not take now: ``code`` and ``message`` for a 429/503."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class EventChannel:
    """The session's socket over a data channel: ``receive`` yields the client's events
    as WebSocket messages, ``send_text`` sends the session's."""

    def __init__(self, on_overflow: Callable[[], None] | None = None) -> None:
        self.channel: Any = None
        self.opened = asyncio.Event()
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_INBOX + 1)
        self.on_overflow = on_overflow
        self.overflowing = False
        self.gone = False
        self.absent = False  # the offer has no data channel: speech only, events unsent

    def attach(self, channel: Any) -> None:
        """The browser's data channel (the first one; later ones are closed)."""
        if self.channel is not None:
            channel.close()
            return
        self.channel = channel
        self.opened.set()

        @channel.on("message")
        def on_message(message: str | bytes) -> None:
            if isinstance(message, str):
                self._put({"type": "websocket.receive", "text": message})
            else:
                self._put({"type": "websocket.receive", "bytes": bytes(message)})

        @channel.on("close")
        def on_close() -> None:
            self.disconnect()

    def _put(self, message: dict[str, Any]) -> None:
        if self.gone:
            return
        if self.inbox.qsize() >= MAX_INBOX:
            if not self.overflowing and self.on_overflow is not None:
                self.on_overflow()
            self.overflowing = True
            return
        self.overflowing = False
        self.inbox.put_nowait(message)

    def disconnect(self) -> None:
        """The client left: the session's next ``receive`` says so."""
        if not self.gone:
            self.gone = True
            self.opened.set()
            with contextlib.suppress(asyncio.QueueFull):
                self.inbox.put_nowait({"type": "websocket.disconnect", "code": 1001})

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.get()

    async def send_text(self, text: str) -> None:
        """One event to the client; ``ConnectionError`` when it cannot be delivered (no
        channel within ``CHANNEL_WAIT_S``, the channel closed, or the client stopped
        reading)."""
        if self.absent:
            return  # a call without a data channel: speech in and out, nobody reads events
        try:
            await asyncio.wait_for(self.opened.wait(), CHANNEL_WAIT_S)
        except TimeoutError:
            raise ConnectionError("no data channel was opened") from None
        channel = self.channel
        if self.gone or channel is None or channel.readyState != "open":
            raise ConnectionError("the data channel is closed")
        if channel.bufferedAmount > MAX_CHANNEL_BUFFER:
            raise ConnectionError("the client does not read its events")
        channel.send(text)

    async def flush(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """Wait (bounded) until what was sent has left the channel's buffer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (self.channel is not None and self.channel.readyState == "open"
               and self.channel.bufferedAmount > 0 and loop.time() < deadline):
            await asyncio.sleep(0.05)


async def pump_microphone(track: Any, session: RealtimeSession) -> None:
    """The browser's microphone into the session as 24 kHz PCM16, until the track ends
    or the session closes (audio after ``session.close`` is not translated, as a
    WebSocket append after it is refused)."""
    import av
    from aiortc.mediastreams import MediaStreamError

    resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        if session.closing:
            continue
        pcm = b"".join(out.to_ndarray().tobytes() for out in resampler.resample(frame))
        if pcm:
            try:
                await session.append(pcm)
            except ClientGone:
                return


class RealtimeCall:
    """One browser: its peer connection, data channel, speech track and session."""

    def __init__(self, pc: Any, owner: str | None) -> None:
        self.id = "rtc_" + secrets.token_urlsafe(16)
        self.pc = pc
        self.owner = owner
        self.channel = EventChannel(self._overflow)
        self.session: RealtimeSession | None = None
        self.track: Any = None  # the speech track (``SpeechTrack``)
        self.tasks: list[asyncio.Task] = []
        self.task: asyncio.Task | None = None  # the session
        self._told: set[asyncio.Task] = set()

    def _overflow(self) -> None:
        """Client events arrive faster than the session reads them: one error per
        episode, the excess dropped."""
        session = self.session
        if session is None:
            return

        async def tell() -> None:
            with contextlib.suppress(ClientGone):
                await session.send(events.error_event(
                    "too_many_events", "events arrive faster than the session reads "
                    f"them; more than {MAX_INBOX} waiting were dropped"))

        task = asyncio.get_running_loop().create_task(tell())
        self._told.add(task)
        task.add_done_callback(self._told.discard)

    async def run(self) -> None:
        """The session, then the peer connection closed (after the last events)."""
        assert self.session is not None
        try:
            await self.session.run(self.channel.receive)
            await self.channel.flush()
        except Exception as exc:  # noqa: BLE001 - the session logs its own; this is ours
            log_unexpected(log, exc, "realtime call")
        finally:
            await self.close()

    async def close(self) -> None:
        self.channel.disconnect()
        for task in self.tasks:
            task.cancel()
        if self.track is not None:
            self.track.stop()
        await self.pc.close()


class RealtimeCalls:
    """The server's WebRTC calls by id, at most ``max_calls`` at once."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls
        self.calls: dict[str, RealtimeCall] = {}

    async def open(self, sdp: str, make: Callable[[Send, Any], RealtimeSession],
                   owner: str | None, ice: IceOptions = IceOptions()) -> tuple[RealtimeCall,
                                                                             str]:
        """Answer ``sdp`` and start the session: (call, SDP answer). ``OfferError`` for an
        offer the server cannot answer (``app.live.peer``), ``CallRefused`` when it has no
        room for a call.
        ``make(send, track)`` builds the session with the call's event sender and its
        speech track."""
        if len(self.calls) >= self.max_calls:
            raise CallRefused("too_many_calls", f"this server holds {self.max_calls} "
                              "realtime calls at once; retry later")
        from app.live.realtime.speech_track import SpeechTrack

        pc = new_peer(ice)
        call = RealtimeCall(pc, owner)
        call.track = SpeechTrack()
        microphone: list[Any] = []

        @pc.on("datachannel")
        def on_datachannel(channel: Any) -> None:
            call.channel.attach(channel)

        @pc.on("track")
        def on_track(track: Any) -> None:
            if track.kind == "audio" and not microphone:
                microphone.append(track)
            else:
                call.tasks.append(asyncio.ensure_future(discard(track)))

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                call.channel.disconnect()

        try:
            answer = await answer_offer(pc, sdp, ice, data_channels=True, send=[call.track])
        except NoUdpPort as exc:
            raise CallRefused("no_udp_port", str(exc)) from None
        call.channel.absent = not any(section.data_channel()
                                      for section in Description.parse(sdp).sections)
        call.session = make(call.channel.send_text, call.track)
        if microphone:
            pump = asyncio.ensure_future(pump_microphone(microphone[0], call.session))
            pump.add_done_callback(lambda task: _settle(task, call, "microphone"))
            call.tasks.append(pump)
        self.calls[call.id] = call
        call.task = asyncio.ensure_future(call.run())
        call.task.add_done_callback(lambda _t: self.calls.pop(call.id, None))
        call.task.add_done_callback(lambda task: _settle(task, call, "call"))
        return call, answer

    def get(self, call_id: str, owner: str | None) -> RealtimeCall | None:
        """The call with this id, made by ``owner``'s key; another's is not found."""
        call = self.calls.get(call_id)
        return call if call is not None and call.owner == owner else None

    async def hang_up(self, call: RealtimeCall) -> None:
        """End a call now, as the client leaving does."""
        call.channel.disconnect()
        if call.task is not None:
            await asyncio.wait({call.task}, timeout=CLOSE_WAIT_S * 5)

    def disconnect_idle(self) -> None:
        """At shutdown: calls with no talk under way end now (one with a talk ends when
        its talk, flushed by the shutdown, does)."""
        for call in list(self.calls.values()):
            if call.session is None or call.session.leg is None:
                call.channel.disconnect()


def _settle(task: asyncio.Task, call: RealtimeCall, what: str) -> None:
    """A call's task ended: a fault is logged with its traceback and ends the call (the
    browser sees the peer close and its page can call again), never a silent microphone."""
    if task.cancelled() or task.exception() is None:
        return
    log_unexpected(log, task.exception(), f"realtime call's {what}")
    call.channel.disconnect()
