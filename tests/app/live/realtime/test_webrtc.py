"""The data channel as a realtime session's socket (``EventChannel``): its bounds and its
ends, without a peer (the calls themselves: tests/app/api/test_realtime_webrtc.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.live.realtime.webrtc import MAX_INBOX, EventChannel, _settle


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


class FakeChannel:
    def __init__(self) -> None:
        self.disconnected = 0

    def disconnect(self) -> None:
        self.disconnected += 1


class FakeCall:
    def __init__(self) -> None:
        self.channel = FakeChannel()


def test_a_failing_task_is_logged_and_ends_the_call(caplog) -> None:
    async def broken() -> None:
        raise RuntimeError("decoder gone")

    async def fine() -> None:
        return None

    async def main() -> tuple[FakeCall, FakeCall]:
        bad, good = FakeCall(), FakeCall()
        for coro, call in ((broken(), bad), (fine(), good)):
            task = asyncio.ensure_future(coro)
            task.add_done_callback(lambda t, c=call: _settle(t, c, "microphone"))
            await asyncio.wait({task})
        await asyncio.sleep(0)
        return bad, good

    with caplog.at_level(logging.ERROR, logger="livetrans.realtime"):
        bad, good = asyncio.run(main())
    assert bad.channel.disconnected == 1 and good.channel.disconnected == 0
    assert "unexpected RuntimeError in realtime call's microphone" in caplog.text
