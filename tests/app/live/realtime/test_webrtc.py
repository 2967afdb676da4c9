"""The data channel as a realtime session's socket (``EventChannel``): its bounds and its
ends, without a peer (the calls themselves: tests/app/api/test_realtime_webrtc.py)."""

from __future__ import annotations

import asyncio

import pytest

from app.live.realtime.webrtc import MAX_INBOX, EventChannel


class Channel:
    """The part of aiortc's RTCDataChannel the session's socket uses."""

    def __init__(self) -> None:
        self.readyState = "open"
        self.bufferedAmount = 0
        self.sent: list[str] = []
        self.handlers: dict[str, object] = {}

    def on(self, event: str):  # noqa: ANN201
        def register(fn):  # noqa: ANN001, ANN202
            self.handlers[event] = fn
            return fn
        return register

    def send(self, text: str) -> None:
        self.sent.append(text)

    def close(self) -> None:
        self.readyState = "closed"


def test_events_in_and_out_and_a_closed_channel_is_the_client_leaving() -> None:
    async def main() -> None:
        events = EventChannel()
        channel = Channel()
        events.attach(channel)
        channel.handlers["message"]('{"type": "session.close"}')
        channel.handlers["message"](b"\x00\x01")
        assert await events.receive() == {"type": "websocket.receive",
                                          "text": '{"type": "session.close"}'}
        assert (await events.receive())["bytes"] == b"\x00\x01"
        await events.send_text("hello")
        assert channel.sent == ["hello"]
        second = Channel()
        events.attach(second)  # a second data channel is closed, the first kept
        assert second.readyState == "closed" and events.channel is channel
        channel.handlers["close"]()
        assert (await events.receive())["type"] == "websocket.disconnect"
        with pytest.raises(ConnectionError):
            await events.send_text("after")

    asyncio.run(main())


def test_client_events_beyond_the_bound_are_dropped_and_told_once() -> None:
    async def main() -> None:
        told: list[int] = []
        events = EventChannel(on_overflow=lambda: told.append(1))
        channel = Channel()
        events.attach(channel)
        for _ in range(MAX_INBOX + 50):
            channel.handlers["message"]("{}")
        assert events.inbox.qsize() == MAX_INBOX and told == [1]
        await events.receive()
        channel.handlers["message"]("{}")  # room again: the episode is over
        for _ in range(5):
            channel.handlers["message"]("{}")
        assert told == [1, 1]

    asyncio.run(main())


def test_a_client_that_does_not_read_is_gone_and_a_call_without_a_channel_is_quiet() -> None:
    async def main() -> None:
        events = EventChannel()
        channel = Channel()
        events.attach(channel)
        channel.bufferedAmount = 64 * 1024 * 1024
        with pytest.raises(ConnectionError):
            await events.send_text("x")
        quiet = EventChannel()
        quiet.absent = True
        await asyncio.wait_for(quiet.send_text("nobody reads this"), 1)

    asyncio.run(main())
