"""Ended talks' pushes that are still delivering: held while they run, awaited at shutdown.

When a talk ends, its pushes deliver what is still queued in the background
(``Pushes.flush``, bounded by its ``flush_s``), so the speaker's 'done' never waits for a
slow receiver. A server that shuts down right after (a rolling deploy's SIGTERM, once the
live connections have ended their talks) would cancel those flushes with its event loop,
and YouTube and the webhooks would miss each talk's last finals. So every flush is started
here (one ``PushFlushes`` per server, handed to the live connections in ``LiveServices``)
and the server's shutdown waits for them (``wait``) for what is left of its grace
(``--shutdown-grace-s``). What is still under way then is cancelled (its finals count as
failed in the metrics), and one line says how many finals did not make it.

No ``httpx`` here: the server imports this module whether or not it can push.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

log = logging.getLogger("livetrans.live.outputs")

STOP_WAIT_S = 2.0  # a cancelled flush stops its workers and closes its client within this


class Flushing(Protocol):
    """What a flush is started for: a talk's pushes (``app.live.outputs.delivery``)."""

    async def flush(self) -> None: ...

    def pending(self) -> int:
        """Finals not delivered yet (queued or under way)."""
        ...


class PushFlushes:
    """The flushes under way on this server's event loop."""

    def __init__(self) -> None:
        self.running: dict[asyncio.Task[None], Flushing] = {}

    def start(self, pushes: Flushing) -> None:
        """Flush ``pushes`` in the background, held here until it ends (asyncio keeps only
        a weak reference to a task). Without a running loop nothing can be delivered."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(pushes.flush(), name="livetrans:push-flush")
        self.running[task] = pushes
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self.running.pop(task, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a talk's push flush failed (%s)", type(exc).__name__, exc_info=exc)

    async def wait(self, timeout_s: float) -> int:
        """At shutdown: wait for every flush (one that starts meanwhile too) for at most
        ``timeout_s``, then cancel what is left. Returns the finals not delivered by the
        cancelled flushes (logged in one line; 0 when every flush ended in time)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        while under_way := {task for task in self.running if not task.done()}:
            left = deadline - loop.time()
            if left <= 0:
                break
            await asyncio.wait(under_way, timeout=left)
        late = {task: pushes for task, pushes in self.running.items() if not task.done()}
        if not late:
            return 0
        lost = sum(pushes.pending() for pushes in late.values())
        for task in late:
            task.cancel()
        await asyncio.wait(late, timeout=2 * STOP_WAIT_S)  # workers, then the client
        log.warning("shutdown: the pushes of %d ended talks were still delivering when the "
                    "shutdown grace ran out (--shutdown-grace-s); %d finals were not "
                    "delivered", len(late), lost)
        return lost
