"""Supervised background tasks: a long-lived task that fails is logged, counted, restarted.

A background task (the room bus's stream reader, its lease keeper, an outbox, the
transcript writer) that ends on an unexpected exception ends silently in asyncio: nothing
is logged until the task is collected, and whatever it did (renew leases, hand remote
frames to viewers, write finals) simply stops while the server still says it is healthy.
``Supervisor.spawn`` runs such a task in a loop: an exception is logged once with its
traceback, counted (``on_restart``, a ``/metrics`` counter), and the task starts again after
a backoff that grows while it keeps failing and resets once it has run a while.
Cancellation is the one way to stop it.

A cancel can be lost on Python 3.11. ``asyncio.wait_for`` drops one that arrives as the
awaited thing finishes (gh-86296), and ``asyncio.timeout`` turns one that meets its own
expiry into a ``TimeoutError``: redis-py reads under such a timeout, so a room bus reader
cancelled at that moment saw "Redis timed out", retried, and read on forever while shutdown
waited for it (a CI run hung 900 s so). Two guards: a loop that retries on errors calls
``reraise_lost_cancel`` first, since the task still counts the cancel (``cancelling()``);
and ``stop`` cancels again until each task has ended, for a bounded time, then logs by
name any task still running and leaves it, so a shutdown (and a test's teardown) ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger("livetrans.supervision")

BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)
HEALTHY_AFTER_S = 30.0  # a task that ran this long before failing starts the backoff anew
STOP_PATIENCE_S = 10.0  # how long ``stop`` waits for its tasks to end
CANCEL_AGAIN_S = 0.2  # a task still running this long after a cancel is cancelled again


def reraise_lost_cancel() -> None:
    """Raise ``CancelledError`` if this task was cancelled and the cancel came back as an
    ordinary error (see the module doc): a loop that catches errors to retry or to go on
    with the next item calls this first in its handler, so a cancelled task stops. Not for
    cleanup code, which may run while a cancel is on its way (see ``wait_event``)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Whether ``event`` is set within ``timeout_s``, in a loop that must stop when
    cancelled: neither 3.11's ``wait_for`` nor its ``asyncio.timeout`` keeps every cancel
    (see the module doc), so a timeout is checked for a lost one. Only for a task's own
    loop: in a cleanup that runs while a cancel is on its way (a ``finally``), the task
    counts that cancel too, and a timeout here would raise it and skip the rest."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
        return True
    except TimeoutError:
        reraise_lost_cancel()
        return False


class Supervisor:
    """Starts and watches named background tasks on the running event loop."""

    def __init__(self, on_restart: Callable[[str], None] | None = None,
                 backoff_s: tuple[float, ...] = BACKOFF_S,
                 healthy_after_s: float = HEALTHY_AFTER_S) -> None:
        self.on_restart = on_restart
        self.backoff_s = backoff_s
        self.healthy_after_s = healthy_after_s
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.restarts: dict[str, int] = {}

    def spawn(self, name: str, body: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Run ``body()`` until cancelled, restarting it after an unexpected exception.
        ``name`` is ours (a fixed word, never client text): it names the task in logs and
        metrics. A body that returns is done and is not restarted."""
        task = asyncio.create_task(self._run(name, body), name=f"livetrans:{name}")
        self.tasks[name] = task
        return task

    async def _run(self, name: str, body: Callable[[], Awaitable[None]]) -> None:
        failures = 0
        while True:
            began = time.monotonic()
            try:
                await body()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the point: nothing ends it silently
                reraise_lost_cancel()
                if time.monotonic() - began >= self.healthy_after_s:
                    failures = 0
                delay = self.backoff_s[min(failures, len(self.backoff_s) - 1)]
                failures += 1
                self.restarts[name] = self.restarts.get(name, 0) + 1
                log.error("background task %s failed (%s); restarting in %.1f s", name,
                          type(exc).__name__, delay, exc_info=exc)
                if self.on_restart is not None:
                    with contextlib.suppress(Exception):
                        self.on_restart(name)
                await asyncio.sleep(delay)

    async def stop(self, patience_s: float = STOP_PATIENCE_S) -> list[str]:
        """Cancel every task and wait until each has ended, cancelling again any that
        swallowed its cancel (see the module doc), for at most ``patience_s``. Returns the
        names of the tasks still running then (logged; normally none)."""
        tasks = dict(self.tasks)
        self.tasks.clear()
        running = set(tasks.values())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience_s
        while running:
            for task in running:
                task.cancel()
            left = deadline - loop.time()
            if left <= 0:
                break
            _, running = await asyncio.wait(running, timeout=min(CANCEL_AGAIN_S, left))
        for task in tasks.values():
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: a body's last error was logged by ``_run``
        stuck = [name for name, task in tasks.items() if not task.done()]
        if stuck:
            log.error("background tasks %s did not stop within %.0f s of being cancelled; "
                      "left behind", ", ".join(stuck), patience_s)
        return stuck
