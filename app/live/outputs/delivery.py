"""Delivery of a talk's pushes: one bounded queue and one worker per output.

The caption path only calls ``Pushes.final``, which appends to each matching output's
queue and returns: it never awaits, so a slow, failing or hanging receiver delays no
caption, and each output has its own worker, so it delays no other output either. A full
queue drops its oldest final (counted): for live captions the newest matter most.

A worker sends its finals in order, one request at a time. A request is bounded in time
(``request_s``, connect to last byte) and in what it reads back (``MAX_RESPONSE_BYTES``);
redirects are not followed. A final is retried with jittered exponential backoff on
network errors, timeouts, 408, 425, 429 and 5xx, for ``retry_s`` after it was captioned
(YouTube shows a caption only near its time, and a receiver that is down for minutes
should get the talk's newest finals when it is back, not a backlog), so a final costs at
most ``retry_s`` and one request; one that waited longer than that in the queue is not
sent. Any other status, or a host that resolves to an address the operator does not
allow, fails it at once.

``Pushes`` lives as long as the speaker's talk (``app.rooms.talk.Talk`` calls ``final``
for every final caption and ``close`` when the talk ends); after ``close`` the workers
deliver what is queued for at most ``flush_s``, then stop, and the client closes. That
flush runs in the server's ``PushFlushes`` (``flushes``), which the server's shutdown
awaits within its grace, so a rolling deploy does not cut a talk's last finals off.
Deliveries are counted per output (the caption's ``stats``) and in the server's metrics
(``on_event``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from app.live.frames import log_unexpected
from app.live.outputs import webhook, youtube
from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputSpec
from app.live.outputs.flushes import STOP_WAIT_S, PushFlushes
from app.live.outputs.net import GuardedTransport, refused_address
from app.live.outputs.resolve import Resolver
from app.rooms.bus import TalkInfo
from app.rooms.transcripts.store import TranscriptLine
from app.supervision import reraise_lost_cancel

log = logging.getLogger("livetrans.live.outputs")

MAX_RESPONSE_BYTES = 64 * 1024  # what a receiver's answer may cost us; the rest is unread
RETRY_STATUSES = frozenset({408, 425, 429})
FLUSH_MAX_S = 15.0  # an ended talk's pushes get this long at most to deliver what is queued
USER_AGENT = "livetrans-pushes"

# (output type, event, seconds): events "queued", "delivered" (seconds: caption to
# delivery), "failed", "dropped", "retries" (one more attempt of a final)
OnEvent = Callable[[str, str, float], None]
Outcome = Literal["ok", "retry", "fail"]


def _ignore(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class DeliveryTimes:
    """The bounds of delivery (``serve --output-timeout-s``, ``--output-retry-s``)."""

    request_s: float = 10.0  # one request, from connecting to the answer's last byte
    retry_s: float = 30.0  # how long after its caption a final is still tried
    flush_s: float = 10.0  # after the talk ends, how long queued finals may still take
    backoff_first_s: float = 0.5
    backoff_max_s: float = 8.0
    queue: int = 256  # finals waiting per output; beyond it the oldest is dropped

    @classmethod
    def bounded(cls, request_s: float, retry_s: float) -> DeliveryTimes:
        """The server's settings (``--output-timeout-s``, ``--output-retry-s``): after the
        talk, a final may still take its retries and one request, at most ``FLUSH_MAX_S``."""
        return cls(request_s=request_s, retry_s=retry_s,
                   flush_s=min(retry_s + request_s, FLUSH_MAX_S))


@dataclass(frozen=True)
class Final:
    """One final caption to push: its talk, language and transcript line."""

    room: str
    talk: str
    lang: str
    line: TranscriptLine
    at: float  # unix seconds when it was captioned (YouTube's caption time)
    queued: float  # monotonic seconds: its retry window starts here


class Output:
    """One output's queue, worker and counts."""

    def __init__(self, spec: OutputSpec, client: httpx.AsyncClient, times: DeliveryTimes,
                 on_event: OnEvent = _ignore) -> None:
        self.spec, self.client, self.times, self.on_event = spec, client, times, on_event
        self.queue: deque[Final] = deque()
        self.wakeup = asyncio.Event()
        self.closed = False
        self.in_flight = False
        self.seq = 0  # YouTube's seq of the last post of new data
        self.failing = False  # logged once per run of failures, not once per final
        self.counts = {"delivered": 0, "failed": 0, "dropped": 0, "retries": 0}

    # -- the caption path: never waits ---------------------------------------------------
    def put(self, final: Final) -> None:
        if self.closed:
            return
        if len(self.queue) >= self.times.queue:
            self.queue.popleft()
            self._count("dropped")
        self.queue.append(final)
        self.on_event(self.spec.type, "queued", 0.0)
        self.wakeup.set()

    def stats(self) -> dict[str, Any]:
        """Deliveries so far, for a caption's ``stats`` (no URL, no secret)."""
        return {"output": self.spec.index, "type": self.spec.type, **self.counts,
                "pending": len(self.queue) + (1 if self.in_flight else 0)}

    def close(self) -> None:
        self.closed = True
        self.wakeup.set()

    def _count(self, event: str, seconds: float = 0.0) -> None:
        self.counts[event] += 1
        self.on_event(self.spec.type, event, seconds)

    # -- the worker ------------------------------------------------------------------------
    async def run(self) -> None:
        """Deliver finals in order until closed and empty."""
        while True:
            while not self.queue:
                if self.closed:
                    return
                self.wakeup.clear()
                await self.wakeup.wait()
            final = self.queue.popleft()
            self.in_flight = True  # left set if the flush cancels it: then it failed
            try:
                await self.deliver(final)
            except Exception as exc:  # noqa: BLE001 - a bug costs one final, not the output
                reraise_lost_cancel()
                log_unexpected(log, exc, "push output")
                self._count("failed")
            self.in_flight = False

    def abandon(self) -> None:
        """The flush's time is over: what is still queued (or under way) failed."""
        for _ in range(len(self.queue) + (1 if self.in_flight else 0)):
            self._count("failed")
        self.queue.clear()
        self.in_flight = False

    def request(self, final: Final, seq: int) -> tuple[str, dict[str, str], bytes]:
        """The URL, headers and body of one final's POST."""
        spec, line = self.spec, final.line
        if spec.type == "youtube":
            return (youtube.url_with_seq(spec.url, seq),
                    {"Content-Type": youtube.CONTENT_TYPE},
                    youtube.body(final.at, line.text))
        data = webhook.body(final.room, final.talk, final.lang, line.segment, line.start_s,
                            line.end_s, line.source, line.text)
        return spec.url, {"Content-Type": webhook.CONTENT_TYPE,
                          webhook.SIGNATURE_HEADER: webhook.signature(spec.secret or "", data)
                          }, data

    async def deliver(self, final: Final) -> None:
        """One final: tried until it lands, fails for good, or its retry window closes."""
        retry_until = final.queued + self.times.retry_s
        if time.monotonic() >= retry_until + self.times.request_s:
            self._gave_up(final, "it waited in the queue past its retry window")
            return
        self.seq += 1  # new caption data: the next seq; a retry keeps it (YouTube's rule)
        url, headers, data = self.request(final, self.seq)
        delay = self.times.backoff_first_s
        while True:
            outcome, why = await self.attempt(url, headers, data, self.times.request_s)
            if outcome == "ok":
                self._count("delivered", max(0.0, time.monotonic() - final.queued))
                if self.failing:
                    self.failing = False
                    log.info("push output %d (%s) of talk %s delivers again",
                             self.spec.index, self.spec.type, final.talk)
                return
            left = retry_until - time.monotonic()
            if outcome == "fail" or left <= 0:
                self._gave_up(final, why)
                return
            self._count("retries")
            await asyncio.sleep(min(left, delay * random.uniform(0.5, 1.0)))
            delay = min(delay * 2, self.times.backoff_max_s)

    def _gave_up(self, final: Final, why: str) -> None:
        self._count("failed")
        if not self.failing:
            self.failing = True
            log.warning("push output %d (%s) of talk %s: a final was not delivered (%s); "
                        "later ones are still tried", self.spec.index, self.spec.type,
                        final.talk, why)

    async def attempt(self, url: str, headers: dict[str, str], data: bytes,
                      limit_s: float) -> tuple[Outcome, str]:
        """One POST, bounded in time and in what is read back: (outcome, why not ok)."""
        try:
            async with asyncio.timeout(limit_s):
                async with self.client.stream("POST", url, content=data,
                                              headers=headers) as response:
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read > MAX_RESPONSE_BYTES:
                            break
                    status = response.status_code
        except TimeoutError:
            reraise_lost_cancel()  # a cancel that met this timeout comes back as one
            return "retry", "timed out"
        except httpx.HTTPError as exc:
            if refused_address(exc):
                return "fail", "the host resolves to an address this server does not allow"
            return "retry", type(exc).__name__
        except OSError as exc:
            return "retry", type(exc).__name__
        if 200 <= status < 300:
            return "ok", ""
        if status in RETRY_STATUSES or status >= 500:
            return "retry", f"HTTP {status}"
        return "fail", f"HTTP {status}"


# flushes of pushes made without a server's ``PushFlushes`` (tests): held here, or asyncio
# could collect them before they finish
_UNTRACKED = PushFlushes()


class Pushes:
    """A talk's outputs: what ``Talk`` hands every final caption to (its final sink)."""

    def __init__(self, specs: list[OutputSpec], policy: HostPolicy,
                 times: DeliveryTimes | None = None, on_event: OnEvent = _ignore,
                 flushes: PushFlushes | None = None, resolver: Resolver | None = None,
                 ) -> None:
        """``flushes``: where ``close`` starts the flush (the server's, which its shutdown
        awaits); ``resolver``: host names' lookups (default: the process's own)."""
        self.times = times if times is not None else DeliveryTimes()
        self.flushes = flushes if flushes is not None else _UNTRACKED
        self.client = httpx.AsyncClient(
            transport=GuardedTransport(policy, max_connections=max(1, len(specs)),
                                       resolver=resolver),
            follow_redirects=False, trust_env=False,
            timeout=httpx.Timeout(self.times.request_s),
            headers={"User-Agent": USER_AGENT})
        self.outputs = [Output(spec, self.client, self.times, on_event) for spec in specs]
        loop = asyncio.get_running_loop()
        self.workers = [loop.create_task(o.run()) for o in self.outputs]
        self.closed = False

    def final(self, info: TalkInfo, lang: str, line: TranscriptLine) -> None:
        """One final caption of the talk (any language): queued for that language's
        outputs. Never waits, never raises into the caption path."""
        if self.closed:
            return
        final = Final(room=info.room, talk=str(info.talk_id), lang=lang, line=line,
                      at=time.time(), queued=time.monotonic())
        for output in self.outputs:
            if output.spec.lang == lang:
                try:
                    output.put(final)
                except Exception as exc:  # noqa: BLE001 - a push never costs a caption
                    log_unexpected(log, exc, "push queue", segment=line.segment)

    def stats(self, lang: str) -> list[dict[str, Any]]:
        """The deliveries of ``lang``'s outputs so far, for that language's captions."""
        return [o.stats() for o in self.outputs if o.spec.lang == lang]

    def pending(self) -> int:
        """Finals not delivered yet: queued, or under way."""
        return sum(len(o.queue) + (1 if o.in_flight else 0) for o in self.outputs)

    def close(self) -> None:
        """The talk ended: no more finals; what is queued gets ``flush_s`` at most, in
        the background (``flushes``)."""
        if self.closed:
            return
        self.closed = True
        for output in self.outputs:
            output.close()
        self.flushes.start(self)

    async def flush(self) -> None:
        """Wait for the workers (at most ``flush_s``), stop them, close the client. A
        cancel (the shutdown's grace is over) stops them the same way: what they had not
        delivered counts as failed."""
        try:
            if self.workers:
                await asyncio.wait(self.workers, timeout=self.times.flush_s)
        finally:
            pending = [task for task in self.workers if not task.done()]
            for task in pending:
                task.cancel()
            if pending:  # a cancelled worker ends at its next await
                await asyncio.wait(pending, timeout=STOP_WAIT_S)
            for output in self.outputs:
                output.abandon()
            await self.client.aclose()
