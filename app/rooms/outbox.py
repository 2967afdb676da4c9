"""An ordered, bounded, retrying queue of writes to a store that may go away (Redis).

The speaker must never wait for the room bus: a caption is handed to the outbox and the
speaker's socket gets it at once. The outbox runs the writes in order on one task. While
the store is down, writes that may be lost (a partial caption's frame for viewers on other
replicas) are dropped, and writes that must not be (finals for the recent list and the
transcript, a talk's start and end) wait and are retried with backoff until it returns,
in order. Memory is bounded in bytes: past ``max_kept_bytes`` of waiting writes (each
write says roughly how large it is) the oldest kept one that is not being made goes
(logged and counted), since holding a dead store's backlog forever would let it take the
server down with it. The write being made is never evicted: its outcome is still coming.

What counts as "the store is away" is the caller's to say (``StoreUnavailable``): for
Redis that includes error replies such as OOM or READONLY (``app.rooms.redis_client``). Any other
exception means the write can never succeed (a bug, a malformed key): it is logged with
its reason and skipped, so one bad write does not stop every later one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from app.supervision import reraise_lost_cancel, wait_event

log = logging.getLogger("livetrans.outbox")

MAX_KEPT_BYTES = 64 * 1024 * 1024  # writes that must not be lost, waiting for the store
WRITE_OVERHEAD = 256  # bytes a write costs beyond what it says it carries
MAX_DROPPABLE = 1_000  # writes that may be lost, waiting while the store is up
# waits between tries while the store is away: short, since finals made during an outage
# reach other replicas' viewers only once a try succeeds (``poke`` cuts a wait short)
RETRY_S = (0.2, 0.5, 1.0, 2.0)


class StoreUnavailable(Exception):
    """The store did not answer (connection refused, reset, timed out): retry later."""


@dataclass
class Write:
    run: Callable[[], Awaitable[None]]
    keep: bool  # must not be lost: retried until the store takes it
    what: str = "write"
    # set once the write is made, skipped or lost: for a caller that must know it landed
    # (a room released before the speaker hears ``done``); None when nobody waits
    done: asyncio.Future[None] | None = field(default=None, compare=False)
    size: int = 0  # bytes it carries (text of a frame, a line): what the bound counts

    @property
    def cost(self) -> int:
        return self.size + WRITE_OVERHEAD

    def settle(self) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_result(None)


class Outbox:
    """Writes to one store, in order, on one task (``run``); ``put`` never waits."""

    def __init__(self, name: str, *, max_kept_bytes: int = MAX_KEPT_BYTES,
                 max_droppable: int = MAX_DROPPABLE,
                 on_up: Callable[[bool], None] | None = None,
                 on_error: Callable[[], None] | None = None,
                 on_pending: Callable[[int], None] | None = None) -> None:
        self.name = name
        self.max_kept_bytes, self.max_droppable = max_kept_bytes, max_droppable
        self.writes: deque[Write] = deque()
        self.kept = 0  # writes with ``keep`` among ``writes``
        self.kept_bytes = 0  # their cost
        self.running: Write | None = None  # the write being made (never evicted)
        self.up = True
        self.lost = 0  # kept writes dropped past ``max_kept``
        self.dropped = 0  # droppable writes not made
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._retry_now = asyncio.Event()
        self._on_up, self._on_error, self._on_pending = on_up, on_error, on_pending

    def __len__(self) -> int:
        return len(self.writes)

    def put(self, write: Write) -> None:
        if not write.keep:
            if not self.up or len(self.writes) - self.kept >= self.max_droppable:
                self.dropped += 1
                write.settle()
                return
        else:
            self._make_room(write.cost)
        self.writes.append(write)
        self.kept += write.keep
        self.kept_bytes += write.cost if write.keep else 0
        self._idle.clear()
        self._wake.set()
        self._pending()

    def _make_room(self, cost: int) -> None:
        """Evict the oldest kept writes (never the one being made) until ``cost`` fits."""
        while self.kept_bytes + cost > self.max_kept_bytes:
            oldest = next((i for i, w in enumerate(self.writes)
                           if w.keep and w is not self.running), None)
            if oldest is None:
                return  # only the running write is left: it is not ours to drop
            lost = self.writes[oldest]
            del self.writes[oldest]
            lost.settle()
            self.kept -= 1
            self.kept_bytes -= lost.cost
            self.lost += 1
            if self.lost == 1 or self.lost % 1000 == 0:
                log.error("%s: %d waiting writes lost (oldest: %s); the store has been "
                          "away too long", self.name, self.lost, lost.what)

    def barrier(self) -> asyncio.Future[None]:
        """A future that completes once every write put before it is made, skipped or
        lost (writes run in order): "what this talk wrote has landed"."""
        async def nothing() -> None:
            return None

        done = asyncio.get_running_loop().create_future()
        self.put(Write(nothing, keep=True, what="barrier", done=done))
        return done

    async def run(self) -> None:
        """Make the writes until cancelled."""
        failures = 0
        while True:
            if not self.writes:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            write = self.running = self.writes[0]
            try:
                await write.run()
            except StoreUnavailable as exc:
                reraise_lost_cancel()  # a cancel that met the client's timeout reads as one
                if self._on_error is not None:
                    self._on_error()
                self._set_up(False, str(exc))
                if not write.keep:
                    self._pop()
                    self.dropped += 1
                    continue
                await self._wait_to_retry(RETRY_S[min(failures, len(RETRY_S) - 1)])
                failures += 1
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bug must not stop every later write
                reraise_lost_cancel()
                log.error("%s: %s can never be made and is skipped: %s: %s", self.name,
                          write.what, type(exc).__name__, " ".join(str(exc).split())[:200])
                self._pop()
                continue
            finally:
                self.running = None
            failures = 0
            self._pop()
            self._set_up(True)

    def poke(self) -> None:
        """The store answers again (another client of it saw so): retry now, not after
        the rest of the backoff."""
        self._retry_now.set()

    async def _wait_to_retry(self, delay: float) -> None:
        self._retry_now.clear()
        await wait_event(self._retry_now, delay)  # keeps a cancel, unlike 3.11's wait_for

    async def drain(self, timeout: float) -> bool:
        """Wait until every write is made (True) or ``timeout`` passes (False). A one-shot
        wait, often in a shutdown's cleanup: a timeout is never turned into a cancel here
        (as ``wait_event`` would for a cancelled task), or the cleanup after it is skipped."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    def _pop(self) -> None:
        write = self.writes.popleft()
        write.settle()
        self.kept -= write.keep
        self.kept_bytes -= write.cost if write.keep else 0
        self._pending()

    def _pending(self) -> None:
        if self._on_pending is not None:
            self._on_pending(self.kept)

    def _set_up(self, up: bool, why: str = "") -> None:
        if up == self.up:
            return
        self.up = up
        if up:
            log.warning("%s: back; %d waiting writes are being made", self.name, self.kept)
        else:  # logged once per outage, not per write
            log.error("%s: unavailable (%s); viewers on other replicas miss frames, finals "
                      "wait here until it returns", self.name, why)
        if self._on_up is not None:
            self._on_up(up)
