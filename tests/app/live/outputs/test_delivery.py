"""The delivery of pushes against a real local HTTP receiver (no model, no server).

Each test runs ``Pushes`` in its own event loop against ``Receiver`` (a thread): YouTube
lines and seq, webhook signatures, retries, receivers that are slow, fail, hang, redirect
or answer too much, the host policy at connect time, and the flush when the talk ends.
Waits are bounds against hanging, never timings.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputSpec
from app.live.outputs.delivery import DeliveryTimes, Pushes
from app.live.outputs.webhook import verify
from app.rooms.bus import TalkInfo
from app.rooms.transcripts.store import TranscriptLine
from tests.app.live.outputs.receiver import Receiver

LOOPBACK = HostPolicy.from_entries(["127.0.0.1"])
FAST = DeliveryTimes(request_s=2.0, retry_s=6.0, flush_s=6.0, backoff_first_s=0.05,
                     backoff_max_s=0.2)
INFO = TalkInfo(room="keynote-1", talk_id="t-1", replica="r", langs=("de", "ja"),
                started_at=0.0)
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")


def youtube(url: str, index: int = 0, lang: str = "de") -> OutputSpec:
    return OutputSpec(index=index, type="youtube", url=url + "/closedcaption?cid=KEY",
                      host="127.0.0.1", lang=lang)


def hook(url: str, index: int = 0, lang: str = "de", secret: str = "s3cret") -> OutputSpec:
    return OutputSpec(index=index, type="webhook", url=url + "/hook", host="127.0.0.1",
                      lang=lang, secret=secret)


def line(segment: int, text: str = "Hallo Welt.") -> TranscriptLine:
    return TranscriptLine(segment=segment, start_s=1.5 + segment, end_s=2.25 + segment,
                          source=f"Hello world {segment}.", text=text)


async def _until(check: Callable[[], bool], limit: float = 30) -> None:
    async with asyncio.timeout(limit):
        while not check():
            await asyncio.sleep(0.02)


def run_pushes(specs: list[OutputSpec], body: Callable[[Pushes], Any],
               times: DeliveryTimes = FAST, policy: HostPolicy = LOOPBACK,
               events: list | None = None) -> Any:
    """Run ``body(pushes)`` (a coroutine function) in a fresh loop; close and flush."""
    async def main() -> Any:
        pushes = Pushes(specs, policy, times,
                        on_event=(lambda *e: events.append(e)) if events is not None
                        else lambda *e: None)
        try:
            return await body(pushes)
        finally:
            pushes.close()
            await asyncio.wait_for(pushes.flush(), 30)
    return asyncio.run(main())


def test_youtube_lines_and_seq_and_webhook_signatures() -> None:
    events: list = []
    with Receiver() as rx:
        async def body(pushes: Pushes) -> None:
            for seg in range(3):
                pushes.final(INFO, "de", line(seg, f"Satz {seg}\nzwei"))
                pushes.final(INFO, "ja", line(seg, "こんにちは"))
            await _until(lambda: [s["delivered"] for s in pushes.stats("de")] == [3, 3])
            await _until(lambda: len(rx.requests) >= 6)

        run_pushes([youtube(rx.url, 0), hook(rx.url, 1), hook(rx.url, 2, lang="fr")], body,
                   events=events)
        got = rx.requests
    posts = [r for r in got if r.path == "/closedcaption"]
    hooks = [r for r in got if r.path == "/hook"]
    assert [r.query["seq"] for r in posts] == [["1"], ["2"], ["3"]]
    assert all(r.query["cid"] == ["KEY"] for r in posts)
    for seg, post in enumerate(posts):
        assert post.headers["Content-Type"] == "text/plain"
        stamp, text, end = post.body.decode("utf-8").split("\n")
        assert STAMP.match(stamp) and text == f"Satz {seg}<br>zwei" and end == ""
    for seg, r in enumerate(hooks):  # the "fr" output gets nothing: no such caption
        assert verify("s3cret", r.body, r.headers["X-Livetrans-Signature"])
        assert not verify("other", r.body, r.headers["X-Livetrans-Signature"])
        assert r.headers["Content-Type"] == "application/json"
        assert json.loads(r.body) == {"room": "keynote-1", "talk": "t-1", "lang": "de",
                                      "segment": seg, "start": 1.5 + seg, "end": 2.25 + seg,
                                      "source": f"Hello world {seg}.",
                                      "text": f"Satz {seg}\nzwei"}
    assert len(hooks) == 3
    kinds = {(k, e) for k, e, _ in events}
    assert ("youtube", "delivered") in kinds and ("webhook", "queued") in kinds


def test_a_failing_receiver_is_retried_with_the_same_seq_then_delivered() -> None:
    with Receiver() as rx:
        rx.statuses = [500, 503, 429]

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            pushes.final(INFO, "de", line(1))
            await _until(lambda: pushes.stats("de")[0]["delivered"] == 2)
            return pushes.stats("de")[0]

        stats = run_pushes([youtube(rx.url)], body)
        seqs = [(status, r.query["seq"][0]) for status, r in rx.seen]
    assert seqs == [(500, "1"), (503, "1"), (429, "1"), (200, "1"), (200, "2")]
    assert stats["delivered"] == 2 and stats["retries"] == 3 and stats["failed"] == 0


def test_a_client_error_is_not_retried_and_the_next_final_still_goes() -> None:
    with Receiver() as rx:
        rx.statuses = [400]

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            pushes.final(INFO, "de", line(1))
            await _until(lambda: pushes.stats("de")[0]["delivered"] == 1)
            return pushes.stats("de")[0]

        stats = run_pushes([hook(rx.url)], body)
    assert stats["failed"] == 1 and stats["delivered"] == 1 and stats["retries"] == 0
    assert json.loads(rx.requests[0].body)["segment"] == 1


def test_a_receiver_that_always_fails_is_given_up_within_the_retry_window() -> None:
    times = DeliveryTimes(request_s=1.0, retry_s=0.5, flush_s=5.0, backoff_first_s=0.05,
                          backoff_max_s=0.1)
    with Receiver() as rx:
        rx.status = 500

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: pushes.stats("de")[0]["failed"] == 1)
            return pushes.stats("de")[0]

        stats = run_pushes([hook(rx.url)], body, times=times)
    assert stats["delivered"] == 0 and stats["retries"] >= 1 and stats["pending"] == 0


def test_a_hanging_receiver_delays_neither_the_caller_nor_other_outputs() -> None:
    times = DeliveryTimes(request_s=0.5, retry_s=1.0, flush_s=3.0, backoff_first_s=0.05,
                          backoff_max_s=0.1)
    with Receiver() as hung, Receiver() as ok:
        hung.hang = True

        async def body(pushes: Pushes) -> tuple[dict, dict]:
            for seg in range(5):
                pushes.final(INFO, "de", line(seg))  # returns at once: nothing awaited
            await _until(lambda: pushes.stats("de")[1]["delivered"] == 5)
            assert hung.hits >= 1 and not hung.requests
            await _until(lambda: pushes.stats("de")[0]["failed"] >= 1)
            return pushes.stats("de")[0], pushes.stats("de")[1]

        stuck, fine = run_pushes([hook(hung.url, 0), youtube(ok.url, 1)], body, times=times)
    assert fine["delivered"] == 5 and fine["failed"] == 0
    assert stuck["delivered"] == 0 and stuck["failed"] >= 1


def test_a_slow_receiver_fills_its_bounded_queue_and_the_oldest_are_dropped() -> None:
    times = DeliveryTimes(request_s=5.0, retry_s=30.0, flush_s=10.0, queue=3)
    with Receiver() as rx:
        rx.hang = True

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: rx.hits >= 1)  # segment 0 is under way, held
            for seg in range(1, 8):
                pushes.final(INFO, "de", line(seg))
            stats = pushes.stats("de")[0]
            rx.hang = False
            rx.release.set()
            await _until(lambda: len(rx.requests) >= 4)
            return stats

        stats = run_pushes([hook(rx.url)], body, times=times)
        segments = [json.loads(r.body)["segment"] for r in rx.requests]
    assert stats["dropped"] == 4 and stats["pending"] == 4  # 3 queued + 1 under way
    # segment 0's held request is answered by a closed connection: retried; then the newest
    assert segments == [0, 5, 6, 7]


def test_redirects_are_not_followed() -> None:
    with Receiver() as rx, Receiver() as target:
        rx.redirect_to = target.url + "/hook"

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: pushes.stats("de")[0]["failed"] == 1)
            return pushes.stats("de")[0]

        stats = run_pushes([hook(rx.url)], body)
        assert target.hits == 0
    assert stats["delivered"] == 0 and stats["retries"] == 0


def test_a_huge_answer_is_read_only_up_to_its_bound() -> None:
    with Receiver() as rx:
        rx.big_body = 8 * 1024 * 1024

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: pushes.stats("de")[0]["delivered"] == 1)
            return pushes.stats("de")[0]

        assert run_pushes([hook(rx.url)], body)["failed"] == 0


@pytest.mark.parametrize("entries", [["*"], ["*.localhost"], []])
def test_a_name_that_resolves_to_loopback_is_refused_at_connect_time(entries) -> None:
    """``localhost`` passes a wildcard at ``start`` but resolves to a loopback address,
    which no entry names: no request is made, and the final fails without retries."""
    with Receiver() as rx:
        port = rx.server.server_address[1]
        spec = OutputSpec(index=0, type="webhook", url=f"http://localhost:{port}/hook",
                          host="localhost", lang="de", secret="s")

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: pushes.stats("de")[0]["failed"] == 1)
            return pushes.stats("de")[0]

        stats = run_pushes([spec], body, policy=HostPolicy.from_entries(entries))
        assert rx.hits == 0
    assert stats["retries"] == 0


def test_a_named_host_may_resolve_to_loopback() -> None:
    with Receiver() as rx:
        port = rx.server.server_address[1]
        spec = OutputSpec(index=0, type="webhook", url=f"http://localhost:{port}/hook",
                          host="localhost", lang="de", secret="s")

        async def body(pushes: Pushes) -> None:
            pushes.final(INFO, "de", line(0))
            await _until(lambda: len(rx.requests) == 1)

        run_pushes([spec], body, policy=HostPolicy.from_entries(["localhost"]))


def test_closing_flushes_what_is_queued_within_the_grace() -> None:
    with Receiver() as rx:
        rx.delay_s = 0.05

        async def main() -> dict:
            pushes = Pushes([hook(rx.url)], LOOPBACK, FAST)
            for seg in range(4):
                pushes.final(INFO, "de", line(seg))
            pushes.close()
            pushes.final(INFO, "de", line(9))  # after the end: ignored
            await asyncio.wait_for(pushes.flush(), 30)
            return pushes.stats("de")[0]

        stats = asyncio.run(main())
        assert [json.loads(r.body)["segment"] for r in rx.requests] == [0, 1, 2, 3]
    assert stats["delivered"] == 4 and stats["pending"] == 0


def test_a_hanging_receiver_is_abandoned_when_the_grace_ends() -> None:
    times = DeliveryTimes(request_s=30.0, retry_s=60.0, flush_s=0.3)
    with Receiver() as rx:
        rx.hang = True

        async def main() -> dict:
            pushes = Pushes([hook(rx.url)], LOOPBACK, times)
            pushes.final(INFO, "de", line(0))
            pushes.final(INFO, "de", line(1))
            await _until(lambda: rx.hits >= 1)
            pushes.close()
            await asyncio.wait_for(pushes.flush(), 30)
            return pushes.stats("de")[0]

        stats = asyncio.run(main())
    assert stats["failed"] == 2 and stats["pending"] == 0 and stats["delivered"] == 0


def test_with_no_retry_window_each_final_is_tried_once() -> None:
    times = DeliveryTimes(request_s=2.0, retry_s=0.0, flush_s=5.0)
    with Receiver() as rx:
        rx.statuses = [500]

        async def body(pushes: Pushes) -> dict:
            pushes.final(INFO, "de", line(0))
            pushes.final(INFO, "de", line(1))
            await _until(lambda: pushes.stats("de")[0]["delivered"] == 1)
            return pushes.stats("de")[0]

        stats = run_pushes([hook(rx.url)], body, times=times)
        assert [s for s, _ in rx.seen] == [500, 200]
    assert stats["failed"] == 1 and stats["retries"] == 0
