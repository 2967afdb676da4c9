"""What a ``/v1/live`` speaker sends once started: text partials and finals, or binary PCM
audio (API.md, "Live captions"). Each is checked against the connection's state (started?
stopping? text or audio?) and its limits, then handed on: a text update to the fan-out
(``app.live.pipeline``), audio to the recogniser's input (``app.live.audio``).

Apart from the reader's loop (``app.live.connection``), which dispatches each frame here:
the rules of what a speaker may send when are the protocol's, and they read in one place.
Every refusal is one error frame, never the connection's end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.live.audio import AudioFrameError
from app.live.messages import Refusal, parse_text, segment_of
from app.live.queue import Update

if TYPE_CHECKING:
    from app.live.connection import LiveConnection


async def audio_frame(conn: LiveConnection, frame: bytes) -> None:
    """One binary frame: PCM for an audio speaker, refused for anyone else."""
    audio = conn.audio
    if audio is None:
        if not conn.sessions:
            await conn.error("not_started", "send 'start' (with \"input\": \"audio\" "
                             "for speech) before audio")
        else:
            await conn.error("binary_not_supported", "this connection's input is text: "
                             "send JSON text frames, or start with \"input\": \"audio\"")
        return
    if conn.stopping or audio.ended:
        if not conn.audio_after_stop_refused:  # once, not per frame of a stream
            conn.audio_after_stop_refused = True
            await conn.error("stopping", "'stop' was received; audio after it is not "
                             "recognised")
        return
    dropped = audio.dropped_s
    try:
        audio.accept(frame)
    except AudioFrameError as exc:
        await conn.error(exc.code, exc.message)
        return
    if audio.dropped_s > dropped:
        conn.services.metrics.audio_dropped(audio.dropped_s - dropped)
        if not audio.overrun:
            audio.overrun = True
            await conn.error("audio_overrun", "audio arrives faster than it can be "
                             f"recognised: more than {conn.limits.max_audio_backlog_s:g} s "
                             "wait; frames are dropped until the backlog shrinks "
                             "(send audio in real time)")


async def text_update(conn: LiveConnection, msg: dict[str, Any], final: bool) -> None:
    """A text speaker's 'partial' or 'final': to the fan-out, or one error frame naming its
    segment (before 'start', from an audio speaker, after 'stop', malformed, stale, empty,
    or a final beyond ``max_pending_finals``)."""
    seg = segment_of(msg)
    if not conn.sessions:
        await conn.error("not_started", "send 'start' first", segment=seg, final=final)
        return
    if conn.audio is not None:
        await conn.error("input_is_audio", "this connection's input is audio: send "
                         "binary PCM frames; the server makes partials and finals itself",
                         segment=seg, final=final)
        return
    if conn.stopping:
        await conn.error("stopping", "'stop' was received (or the server is shutting "
                         "down); no new updates", segment=seg, final=final)
        return
    try:
        m = parse_text(msg, conn.services.settings.limits.max_source_chars)
    except Refusal as exc:
        await conn.error(exc.code, exc.message, segment=seg, final=final, param=exc.param)
        return
    if m.segment <= conn.last_final_segment:
        await conn.error("stale_segment", f"segment {m.segment} is already final",
                         segment=m.segment, final=final)
        return
    if not m.text.strip():
        if final:
            await conn.error("empty_text", "a final needs text", segment=m.segment,
                             final=True, param="text")
        return
    if final and len(conn.queue.finals) >= conn.limits.max_pending_finals:
        await conn.error("too_many_pending", f"{len(conn.queue.finals)} finals are "
                         "waiting to be translated; slow down and send this one again",
                         segment=m.segment, final=True)
        return
    if final:
        conn.last_final_segment = m.segment
    conn.fan.submit(Update(m.segment, m.text, final))
