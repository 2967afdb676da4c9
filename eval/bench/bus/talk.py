"""``livetrans bench bus``'s clients: one talk, a speaker and its room's viewers on the live
sockets, paced around a fault."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import suppress
from typing import Any

import websockets

from clients.live_session import LiveSession, LiveSessionRefused
from eval.bench.bus.faults import Plan, fault_window
from eval.bench.bus.results import Talk, ViewerLog, Window
from eval.bench.events import rss_mb
from eval.datasets.streams import lag_k_stream

PACE = 2.0  # from the fault on, the rest of a talk takes this many fault lengths
JOIN_BATCH = 50  # viewers connecting at once (500 viewers join in ten batches)
JOIN_LIMIT_S = 120.0  # for one batch of viewers to join
JOIN_ATTEMPTS = 10  # a viewer refused with room_bus_unavailable tries again ...
JOIN_RETRY_S = 0.5  # ... after this long, as the refusal asks ("retry shortly")
REPLY_LIMIT_S = 120.0  # for the speaker's caption of one update
START_ATTEMPTS = 30  # 'start' refused while the bus recovers: tried again once a second
END_LIMIT_S = 60.0  # after the talk: for 'done', then for every viewer's 'ended'
RSS_EVERY_S = 0.25


# -- clients -------------------------------------------------------------------------------
async def _viewer(url: str, view: ViewerLog, joined: list, stay: bool = True) -> None:
    """One viewer, joined as a client should: refused with ``room_bus_unavailable`` (the
    bus had a moment), it tries again shortly, a bounded number of times (counted).
    ``stay=False``: a probe, gone once in."""
    for attempt in range(JOIN_ATTEMPTS):
        async with websockets.connect(url, max_size=None, open_timeout=JOIN_LIMIT_S) as ws:
            first = json.loads(await ws.recv())
            if first.get("type") == "joined":
                if stay:
                    await _watch(ws, view, first, joined)
                return
            if first.get("code") != "room_bus_unavailable" or attempt == JOIN_ATTEMPTS - 1:
                raise RuntimeError(f"viewer refused: {first.get('code')}: "
                                   f"{first.get('message')}")
        view.refusals += 1
        await asyncio.sleep(JOIN_RETRY_S)


async def _watch(ws: Any, view: ViewerLog, first: dict, joined: list) -> None:
    now = time.perf_counter()
    for payload in first.get("recent") or []:
        view.add(payload, now)
    joined.append(1)
    async for raw in ws:
        frame = json.loads(raw)
        if frame.get("type") == "caption":
            view.add(frame, time.perf_counter())
        elif frame.get("type") == "ended":
            view.ended = True


async def _all_joined(tasks: list[asyncio.Task], joined: list,
                      limit_s: float = JOIN_LIMIT_S) -> None:
    """Wait until every viewer got ``joined``; a viewer that failed (refused, closed) or a
    join that takes longer than ``limit_s`` ends the run with the reason, never a hang."""
    deadline = time.perf_counter() + limit_s
    while len(joined) < len(tasks):
        failed = [t for t in tasks if t.done()]
        if failed:
            exc = failed[0].exception() if not failed[0].cancelled() else None
            raise RuntimeError(f"{len(failed)} of {len(tasks)} viewers ended before the talk "
                               f"began; the first: {type(exc).__name__}: {exc}")
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{len(tasks) - len(joined)} of {len(tasks)} viewers did not "
                               f"join within {limit_s:g} s")
        await asyncio.sleep(0.01)


async def _join_viewers(urls: list[str], views: list[ViewerLog],
                        tasks: list[asyncio.Task]) -> None:
    """Connect the viewers ``JOIN_BATCH`` at a time, each batch joined before the next
    starts: 500 handshakes at once would time out on a busy machine, not measure the bus."""
    joined: list = []
    for i in range(0, len(urls), JOIN_BATCH):
        tasks += [asyncio.create_task(_viewer(url, view, joined))
                  for url, view in zip(urls[i:i + JOIN_BATCH], views[i:i + JOIN_BATCH],
                                       strict=True)]
        await _all_joined(tasks, joined)


async def settle(urls: list[str]) -> int:
    """Probe viewers join a fresh room at once and leave; returns the joins refused (and
    probes never let in). Run right after a fault's talk, so that refusals the fault left
    behind (connections Redis dropped, still pooled) count in its row, not the next one's."""
    room = "settle-" + uuid.uuid4().hex[:8]
    views = [ViewerLog(True) for _ in urls]
    results = await asyncio.gather(
        *(_viewer(f"{url}/v1/live/watch?room={room}&lang=de", view, [], stay=False)
          for url, view in zip(urls, views, strict=True)), return_exceptions=True)
    return sum(v.refusals for v in views) + sum(isinstance(r, Exception) for r in results)


async def _recv(live: LiveSession, deadline: float) -> dict:
    return await live.recv(timeout=max(deadline - time.perf_counter(), 0.001))


async def _start(live: LiveSession, talk: Talk) -> None:
    """'start' until 'ready'. Right after a fault the bus may refuse a room for a moment
    (``room_bus_unavailable``): tried again once a second, ``START_ATTEMPTS`` times."""
    for _ in range(START_ATTEMPTS):
        try:
            await asyncio.wait_for(live.start(target_lang="de", room=talk.room),
                                   REPLY_LIMIT_S)
            return
        except LiveSessionRefused as refused:
            if refused.frame.get("code") != "room_bus_unavailable":
                raise RuntimeError(f"start refused: {refused.frame}") from None
        talk.start_refusals += 1
        await asyncio.sleep(1.0)
    raise RuntimeError(f"start refused {START_ATTEMPTS} times: the room bus is unavailable")


async def _reply(live: LiveSession) -> dict:
    """The speaker's caption (or error) for the update just sent."""
    deadline = time.perf_counter() + REPLY_LIMIT_S
    while True:
        msg = await _recv(live, deadline)
        if msg.get("type") in ("caption", "error"):
            return msg


async def _stop(live: LiveSession) -> None:
    await live.stop()
    deadline = time.perf_counter() + END_LIMIT_S
    with suppress(websockets.ConnectionClosedOK):
        while (await _recv(live, deadline)).get("type") != "done":
            pass


async def _speak(live: LiveSession, sentences: list[str], talk: Talk, plan: Plan | None) -> None:
    """The talk's updates, closed loop. With a plan, its fault starts at the planned update
    and the updates from there on are paced over ``PACE`` fault lengths."""
    updates = [(seg, u) for seg, s in enumerate(sentences) for u in lag_k_stream(s, 3)]
    at = plan.first_update(len(updates)) if plan is not None else -1
    window: asyncio.Task | None = None
    paced_from, pace = 0.0, 0.0
    talk.t0 = time.perf_counter()
    try:
        for i, (seg, update) in enumerate(updates):
            if plan is not None and i == at:
                window = asyncio.create_task(fault_window(plan.injector, plan.fault_s))
                paced_from = time.perf_counter()
                pace = PACE * plan.fault_s / (len(updates) - at)
            if window is not None:
                await asyncio.sleep(max(paced_from + (i - at) * pace - time.perf_counter(), 0))
            kind = "final" if update.is_final else "partial"
            sent = time.perf_counter()
            await live.send_update(kind, update.source, segment=seg)
            talk.updates += 1
            msg = await _reply(live)
            talk.round_trips.append((sent, (time.perf_counter() - sent) * 1000))
            if msg["type"] == "caption":
                talk.sent.setdefault((msg["segment"], msg["revision"], msg["final"]),
                                     time.perf_counter())
            else:
                talk.speaker_errors += 1
        talk.wall_s = time.perf_counter() - talk.t0
    finally:
        if window is not None:  # healed before the talk ends, whatever happened
            await asyncio.wait([window], timeout=plan.fault_s + END_LIMIT_S)
    if window is not None:
        talk.window = _healed(window, plan.injector.kind)


def _healed(window: asyncio.Task, kind: str) -> Window:
    """The fault's window, or why there is none (a fault that failed is the run's end:
    its figures would say nothing about the fault)."""
    if not window.done():
        window.cancel()  # its cleanup heals
        raise RuntimeError(f"fault '{kind}' did not heal in time")
    if window.cancelled():
        raise RuntimeError(f"fault '{kind}' was cancelled")
    exc = window.exception()
    if exc is not None:
        raise RuntimeError(f"fault '{kind}' failed: {type(exc).__name__}: {exc}") from exc
    return window.result()


async def _sample_rss(talk: Talk) -> None:
    while True:
        talk.rss_peak_mb = max(talk.rss_peak_mb, rss_mb())
        await asyncio.sleep(RSS_EVERY_S)


async def _finish(tasks: list[asyncio.Task], limit_s: float) -> None:
    """Let the viewers see the talk end (bounded); any still open then are closed."""
    if tasks:
        await asyncio.wait(tasks, timeout=limit_s)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def run_talk(speaker_url: str, viewer_urls: list[tuple[str, bool]],
                sentences: list[str], plan: Plan | None = None) -> Talk:
    talk = Talk("bench-" + uuid.uuid4().hex[:8], [ViewerLog(same) for _, same in viewer_urls])
    if plan is not None:
        plan.injector.room = talk.room
    sampler = asyncio.create_task(_sample_rss(talk))
    tasks: list[asyncio.Task] = []
    try:
        async with LiveSession(f"{speaker_url}/v1/live", open_timeout=120) as live:
            await _start(live, talk)
            await _join_viewers([f"{url}/v1/live/watch?room={talk.room}&lang=de"
                                 for url, _ in viewer_urls], talk.views, tasks)
            await _speak(live, sentences, talk, plan)
            await _stop(live)
        await _finish(tasks, END_LIMIT_S)
    finally:
        await _finish(tasks, 0)
        sampler.cancel()
    return talk
