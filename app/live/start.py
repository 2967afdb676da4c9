"""The 'start' of a ``/v1/live`` connection: what a speaker's 'start' opens and the 'ready'
that answers it (API.md, "Live captions").

A 'start' opens more than any other frame: the recogniser's stream for an audio speaker,
the room (claimed on every replica through the bus), the talk's pushes, one session per
target language and the per-language pipelines, the voices. Each step can be refused, and
the order decides what a refusal leaves behind, so the handshake reads in one place, apart
from the reader's loop (``app.live.connection``), which only dispatches the frame here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app.live.audio import AudioInput
from app.live.messages import (
    DEFAULT_SAMPLE_RATE,
    Refusal,
    StartMessage,
    parse_start_targets,
)
from app.live.outputs.allow import HostPolicy
from app.live.outputs.config import OutputSpec
from app.live.pipeline import LanguagePipeline
from app.rooms.bus import BusUnavailable, RoomTakenOnBus
from app.rooms.registry import RoomTakenError
from app.speech.recognizer import Recognizer
from app.speech.service import SpeechBusyError, SpeechUnavailableError
from app.translation.sessions import Session, SessionStoreFullError

if TYPE_CHECKING:
    from app.live.connection import LiveConnection


async def start_talk(conn: LiveConnection, msg: dict[str, Any]) -> None:
    """A speaker's 'start': open what it names, or answer why not with one error frame.

    Checked and opened in this order: the frame and its languages (served here?), the
    recogniser's stream for audio, the room (free on every replica?), the pushes, one
    translation session per target language; a refusal after the room was claimed ends
    the talk again. Then the fan-out gets its pipelines, the voices open, audio starts, and
    'ready' says what was opened (a voice this server lacks is reported after 'ready':
    its captions go on).
    """
    if conn.sessions:
        await conn.error("already_started", "'start' was already received")
        return
    if conn.stopping:
        await conn.error("stopping", "'stop' was already received")
        return
    try:
        start, targets, source = parse_start_targets(
            msg, HostPolicy.from_entries(conn.services.settings.outputs.allow_hosts))
    except Refusal as exc:
        await conn.error(exc.code, exc.message, param=exc.param)
        return
    target_param = "target_langs" if start.target_langs else "target_lang"
    unserved = conn.services.unserved({**{f"{target_param}:{t}": t for t in targets},
                                       "source_lang": source})
    if unserved:
        await conn.error("language_not_served", unserved[1],
                         param=unserved[0].split(":", 1)[0])
        return
    stream = None
    if start.input == "audio":
        stream = await _open_speech(conn, source)
        if stream is None:
            return
    settings = conn.services.settings
    registry = conn.services.rooms
    room = None
    if start.room is not None:
        try:
            room = await conn.talk.open(start.room, targets)
        except (RoomTakenError, RoomTakenOnBus):
            _close_speech(conn, stream)
            await conn.error("room_taken", f"room '{start.room}' already has a speaker; "
                             "choose another room or stop the other speaker", param="room")
            return
        except BusUnavailable:
            _close_speech(conn, stream)
            await conn.error("room_bus_unavailable", "the room bus cannot be reached "
                             "now; retry shortly", param="room")
            return
    if start.pushes and not _open_pushes(conn, start.pushes):
        conn.talk.end()
        _close_speech(conn, stream)
        await conn.error("outputs_unavailable", "this server cannot push captions (its "
                         "installation lacks httpx)", param="outputs")
        return
    sessions: dict[str, Session] = {}
    try:
        for target in targets:
            sessions[target] = conn.services.sessions.acquire(None, conn.owner)
    except SessionStoreFullError:
        for session in sessions.values():
            conn.services.sessions.release(session)
            conn.services.sessions.drop(session.session_id, conn.owner)
        conn.talk.end()
        _close_speech(conn, stream)
        await conn.error("server_busy", "every session slot is busy; retry later")
        return
    conn.sessions = sessions
    detokenize = conn.services.detokenize
    conn.fan.pipelines = [
        LanguagePipeline(target, sessions[target],
                         start.translate_options(source, target,
                                                 settings.limits.max_new_tokens),
                         start.display_mode, detokenize,
                         token_bytes=conn.services.token_bytes,
                         append=start.display == "append")
        for target in targets]
    ready: dict[str, Any] = {"type": "ready", "session_id": sessions[targets[0]].session_id,
                             "langs": targets, "display_mode": start.display_mode}
    if start.display == "append":
        ready["display"] = "append"
    unvoiced: list[str] = []
    if start.voice_langs:
        ready["voices"], unvoiced = await conn.voices.open(start.voice_langs)
    if stream is not None:
        _start_audio(conn, start, stream)
        ready["input"] = "audio"
        ready["sample_rate"] = start.sample_rate or DEFAULT_SAMPLE_RATE
    if room is not None:
        ready["room"] = room.name
        ready["talk"] = room.talk_id
        if registry.tokens_required:
            ready["viewer_token"] = registry.token(room.name, str(room.talk_id))
    await conn.publisher.send(ready)
    conn.voices.start()
    for lang in unvoiced:  # captions go on; the speaker hears it once
        await conn.error("voice_unavailable", f"this server has no voice for '{lang}'; "
                         "its captions go on", lang=lang, param="voices")


def _open_pushes(conn: LiveConnection, specs: list[OutputSpec]) -> bool:
    """The talk's pushes (``app.live.outputs``): they get its finals and close with it
    (``Talk.end``); False when this installation cannot push (no httpx)."""
    try:
        from app.live.outputs.delivery import DeliveryTimes, Pushes
    except ImportError:
        return False
    settings = conn.services.settings
    pushes = Pushes(specs, HostPolicy.from_entries(settings.outputs.allow_hosts),
                    DeliveryTimes.bounded(settings.outputs.timeout_s,
                                          settings.outputs.retry_s),
                    on_event=conn.services.metrics.output,
                    flushes=conn.services.flushes)
    conn.talk.sinks.append(pushes)
    conn.publisher.pushes = pushes
    return True


def _close_speech(conn: LiveConnection, stream: Recognizer | None) -> None:
    """A start refused after its recogniser stream opened gives the stream's place
    (``--max-audio-speakers``) back at once, not when the stream is collected."""
    if stream is not None:
        conn.services.speech.close_stream(stream)


async def _open_speech(conn: LiveConnection, language: str) -> Recognizer | None:
    """The recogniser's stream for an audio speaker, or None after an error frame."""
    try:
        return await conn.services.speech.open_stream(language)
    except SpeechUnavailableError as exc:
        await conn.error("speech_unavailable", str(exc), param="input")
        return None
    except SpeechBusyError as exc:
        conn.services.metrics.refused_busy()
        await conn.error("busy", str(exc), param="input")
        return None


def _start_audio(conn: LiveConnection, start: StartMessage, stream: Recognizer) -> None:
    """From now on binary frames are this speaker's audio (``live_audio``)."""
    conn.audio = AudioInput(conn.services.speech, stream, conn.fan, conn.publisher,
                            start.sample_rate or DEFAULT_SAMPLE_RATE,
                            conn.limits.max_audio_backlog_s,
                            conn.limits.max_audio_frame_bytes, pause_translation=not
                            conn.services.settings.speech.no_pause_translation)
    conn.audio_task = asyncio.create_task(conn.audio.run())
