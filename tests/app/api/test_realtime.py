"""``WebSocket /v1/realtime/translations`` and its client secrets, through the official
``openai`` SDK (async and sync) against the real server: Whisper base, the real model,
espeak-ng speech. Event order, what was heard, what was translated, append-only deltas;
then bad input, which gets an ``error`` event (or a close code), never a traceback, and
the session goes on where it can."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI, OpenAI

from app.live.realtime.client_secrets import ClientSecrets
from app.speech.resample import Resampler
from tests.conftest import LiveServer
from tests.speech import SENTENCES, needs_espeak, talk, wer

FRAME = 9600  # 200 ms of 24 kHz PCM16
LIMIT_S = 300  # a bound against hanging, never a latency
GERMAN = {"der", "die", "das", "und", "sie", "wir", "ihr", "ihre", "ihren", "für", "zu",
          "zum", "im", "den", "dem", "ist", "wird", "alle", "euch", "dank", "vielen",
          "danke", "heute", "nächsten", "bericht", "ein", "eine", "mit", "von", "ich"}


def _pcm24(tmp_path: Path) -> bytes:
    """The test sentences said by espeak-ng, as 24 kHz PCM16 mono."""
    audio, rate = talk(tmp_path, SENTENCES)
    out = Resampler(rate, 24_000).process(audio.astype(np.float64))
    return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()


def _appends(pcm: bytes, size: int = FRAME) -> list[dict[str, Any]]:
    return [{"type": "session.input_audio_buffer.append",
             "audio": base64.b64encode(pcm[i:i + size]).decode()}
            for i in range(0, len(pcm), size)]


def _dump(event: Any) -> dict[str, Any]:
    return event.model_dump() if hasattr(event, "model_dump") else dict(event)


def _text(events: list[dict], kind: str) -> str:
    return "".join(e["delta"] for e in events if e["type"] == kind)


def _check_talk(events: list[dict]) -> tuple[str, str]:
    """The event order and the deltas' shape; (input transcript, output transcript)."""
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[-1] == "session.closed"
    assert kinds.count("session.closed") == 1 and "error" not in kinds, events
    created = events[0]["session"]
    assert created["type"] == "translation" and created["id"].startswith("sess_")
    assert created["expires_at"] > time.time()
    assert set(created["audio"]) == {"input", "output"}
    deltas = [e for e in events if e["type"].endswith("transcript.delta")]
    assert deltas and all(e["delta"] for e in deltas)
    elapsed = [e["elapsed_ms"] for e in deltas]
    assert all(ms % 200 == 0 for ms in elapsed) and elapsed == sorted(elapsed)
    heard = _text(events, "session.input_transcript.delta")
    said = _text(events, "session.output_transcript.delta")
    for text in (heard, said):  # append-only, joined by the server: no doubled spaces
        assert text == text.strip() and "  " not in text
    assert len({e["event_id"] for e in events}) == len(events)
    return heard, said


def _check_audio(events: list[dict]) -> float:
    """The audio deltas are decodable 24 kHz PCM16 mono and mostly voiced; their
    seconds."""
    deltas = [e for e in events if e["type"] == "session.output_audio.delta"]
    assert deltas, "no translated speech"
    pcm = b""
    for e in deltas:
        assert (e["format"], e["sample_rate"], e["channels"]) == ("pcm16", 24000, 1)
        assert e["elapsed_ms"] % 200 == 0
        piece = base64.b64decode(e["delta"], validate=True)
        assert piece and len(piece) % 2 == 0
        pcm += piece
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    frames = samples[: len(samples) // 480 * 480].reshape(-1, 480)  # 20 ms
    voiced = np.sqrt((frames ** 2).mean(axis=1)) > 300
    assert voiced.mean() > 0.2, voiced.mean()
    return len(samples) / 24000


@needs_espeak
def test_async_sdk_speech_in_german_text_out_source_detected(live_server,
                                                              tmp_path) -> None:
    pcm = _pcm24(tmp_path)
    client = AsyncOpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0)

    async def main() -> list[dict]:
        got: list[dict] = []
        async with client.realtime.translations.connect(model="livetrans") as conn:
            await conn.send({"type": "session.update", "session": {"audio": {
                "output": {"language": "de"},
                "input": {"transcription": {"model": "whisper"}}}}})

            async def speak() -> None:
                for event in _appends(pcm[:FRAME * 7 + 100], 3000) + _appends(
                        pcm[FRAME * 7 + 100:], FRAME * 3):  # short and long appends
                    await conn.send(event)
                    await asyncio.sleep(0.05)
                await conn.send({"type": "session.close"})

            speaker = asyncio.create_task(speak())
            async with asyncio.timeout(LIMIT_S):
                async for event in conn:
                    got.append(_dump(event))
                    if got[-1]["type"] == "session.closed":
                        break
            await speaker
        return got

    events = asyncio.run(main())
    assert events[1]["type"] == "session.updated"
    assert events[1]["session"]["audio"]["output"]["language"] == "de"
    heard, said = _check_talk(events)
    assert wer(" ".join(SENTENCES), heard) <= 0.3, heard
    assert wer(" ".join(SENTENCES), said) > 0.7, said  # not an echo of the source
    assert GERMAN & {w.strip(".,!?").lower() for w in said.split()}, said
    assert _check_audio(events) > 1.0  # the translation, spoken


def _keyed_server() -> LiveServer:
    return LiveServer(api_keys=["key-1"], max_source_chars=2000)


@pytest.fixture(scope="module")
def keyed_server():
    with _keyed_server() as server:
        yield server


@needs_espeak
def test_sync_sdk_with_a_client_secret_fixed_source_japanese_out(keyed_server,
                                                                 tmp_path) -> None:
    pcm = _pcm24(tmp_path)
    owner = OpenAI(base_url=keyed_server.url + "/v1", api_key="key-1", max_retries=0)
    secret = owner.realtime.translations.client_secrets.create(
        session={"model": "livetrans", "audio": {"output": {"language": "ja"}},
                 "livetrans": {"source_language": "en"}},  # type: ignore[typeddict-unknown-key]
        expires_after={"anchor": "created_at", "seconds": 600})
    assert secret.value.startswith("ek_") and secret.expires_at > time.time()
    assert secret.session.audio.output.language == "ja"
    browser = OpenAI(base_url=keyed_server.url + "/v1", api_key=secret.value, max_retries=0)
    events: list[dict] = []
    with browser.realtime.translations.connect(model="livetrans") as conn:
        first = _dump(conn.recv())
        events.append(first)
        assert first["session"]["audio"]["output"]["language"] == "ja"
        assert first["session"]["livetrans"]["source_language"] == "en"
        conn.send({"type": "session.update", "session": {"audio": {"input": {
            "transcription": {"model": "whisper"}}}}})
        for event in _appends(pcm):
            conn.send(event)
        conn.send({"type": "session.close"})
        while events[-1]["type"] != "session.closed":
            events.append(_dump(conn.recv()))
    heard, said = _check_talk(events)
    assert wer(" ".join(SENTENCES), heard) <= 0.3, heard
    assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", said), said
    assert " " not in said.strip()  # Japanese segments are joined without spaces
    assert _check_audio(events) > 1.0


# -- refusals at the door -------------------------------------------------------------------

def _ws_url(server, query: str = "?model=livetrans") -> str:
    return server.url.replace("http://", "ws://") + "/v1/realtime/translations" + query


async def _refused(url: str, headers: dict[str, str] | None = None) -> tuple[dict, int]:
    """The one error event of a refused session and its close code."""
    async with websockets.connect(url, additional_headers=headers or {}) as ws:
        event = json.loads(await asyncio.wait_for(ws.recv(), 30))
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 30)
        return event, ws.close_code


def _check_error(event: dict, code: str) -> dict:
    assert event["type"] == "error" and event["event_id"].startswith("event_")
    error = event["error"]
    assert set(error) == {"type", "code", "message", "param", "event_id"}
    assert error["code"] == code and error["message"], event
    assert "Traceback" not in error["message"]
    return error


def test_a_session_without_model_or_with_an_unknown_one_is_refused(live_server) -> None:
    event, code = asyncio.run(_refused(_ws_url(live_server, "")))
    assert _check_error(event, "missing_model")["param"] == "model" and code == 1008
    event, code = asyncio.run(_refused(_ws_url(live_server, "?model=gpt-realtime-translate")))
    _check_error(event, "model_not_found")
    assert code == 1008


def test_keys_forged_and_expired_secrets_are_refused_with_an_error_event(
        keyed_server) -> None:
    url = _ws_url(keyed_server)
    for headers, code in [({}, "invalid_api_key"),
                          ({"Authorization": "Bearer wrong"}, "invalid_api_key"),
                          ({"Authorization": "Bearer ek_forged.secret"},
                           "invalid_client_secret")]:
        event, close = asyncio.run(_refused(url, headers))
        _check_error(event, code)
        assert close == 1008
    other = ClientSecrets(["another-server-key"]).mint("another-server-key", {}, 10**10)
    expired = ClientSecrets(["key-1"]).mint("key-1", {}, int(time.time()) - 1)
    for secret, code in [(other, "invalid_client_secret"), (expired, "client_secret_expired")]:
        event, close = asyncio.run(_refused(url, {"Authorization": f"Bearer {secret}"}))
        _check_error(event, code)
    # a client secret cannot mint more secrets
    client = OpenAI(base_url=keyed_server.url + "/v1", api_key=expired, max_retries=0)
    with pytest.raises(Exception) as err:
        client.realtime.translations.client_secrets.create(session={"model": "livetrans"})
    assert getattr(err.value, "status_code", None) == 401
    # ... and the SDK reads a refusal as an error event, not a traceback
    bad = AsyncOpenAI(base_url=keyed_server.url + "/v1", api_key="wrong", max_retries=0)

    async def sdk() -> dict:
        async with bad.realtime.translations.connect(model="livetrans") as conn:
            return _dump(await conn.recv())

    _check_error(asyncio.run(sdk()), "invalid_api_key")


def test_client_secret_requests_are_validated(keyed_server) -> None:
    client = OpenAI(base_url=keyed_server.url + "/v1", api_key="key-1", max_retries=0)
    for session, expires, code in [
            ({"model": "nope"}, None, "model_not_found"),
            ({"model": "livetrans", "audio": {"output": {"language": "tlh"}}}, None,
             "unsupported_language"),
            ({"model": "livetrans"}, {"anchor": "created_at", "seconds": 5}, "invalid_value"),
            ({"model": "livetrans", "voice": "x"}, None, "unknown_parameter")]:
        kwargs = {"expires_after": expires} if expires else {}
        with pytest.raises(Exception) as err:
            client.realtime.translations.client_secrets.create(session=session, **kwargs)
        assert getattr(err.value, "status_code", None) == 400
        assert getattr(err.value, "code", None) == code


# -- bad input inside a session: an error event, and the session goes on --------------------

def test_bad_events_get_error_events_and_the_session_goes_on(live_server, caplog) -> None:
    update = {"type": "session.update", "session": {"audio": {"output": {"language": "de"}}}}
    bad: list[tuple[Any, str]] = [
        ({"type": "session.update", "event_id": "u1",
          "session": {"audio": {"output": {"language": "klingon"}}}}, "unsupported_language"),
        ({"type": "session.update", "session": {"model": "other"}}, "cannot_update_model"),
        ({"type": "session.update", "session": {"audio": {"input": {
            "format": {"type": "audio/pcm", "rate": 16000}}}}}, "unsupported_audio_format"),
        ({"type": "session.input_audio_buffer.append", "event_id": "a1",
          "audio": "not base64 at all!"}, "invalid_audio"),
        ({"type": "session.input_audio_buffer.append",
          "audio": base64.b64encode(b"\x00\x01\x02").decode()}, "invalid_audio"),
        ({"type": "session.input_audio_buffer.append",
          "audio": "A" * (10 * 1024 * 1024)}, "event_too_large"),
        ({"type": "response.create", "event_id": "r1"}, "unknown_event"),
        ({"type": "input_audio_buffer.commit"}, "unknown_event"),
        ("{not json", "invalid_json"),
        (b"\x00\x01", "invalid_event"),
    ]

    async def main() -> list[dict]:
        got: list[dict] = []
        async with websockets.connect(_ws_url(live_server), max_size=None) as ws:
            # events sent before session.created arrived: it still comes first
            await ws.send(json.dumps(update))
            for event, _ in bad:
                await ws.send(event if isinstance(event, (str, bytes)) else json.dumps(event))
                await ws.send(json.dumps(update))  # the session goes on after each
            await ws.send(json.dumps({"type": "session.close"}))
            async with asyncio.timeout(LIMIT_S):
                async for raw in ws:
                    got.append(json.loads(raw))
            assert ws.close_code == 1000
        return got

    with caplog.at_level(logging.WARNING):
        events = asyncio.run(main())
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[1] == "session.updated"
    assert kinds[-1] == "session.closed"
    errors = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == [code for _, code in bad]
    for e in errors:
        _check_error(e, e["error"]["code"])
    by_code: dict[str, dict] = {}
    for e in errors:
        by_code.setdefault(e["error"]["code"], e["error"])  # the first of each code
    assert by_code["unsupported_language"]["event_id"] == "u1"
    assert by_code["unsupported_language"]["param"] == "session.audio.output.language"
    assert by_code["invalid_audio"]["event_id"] == "a1"
    assert by_code["unknown_event"]["event_id"] == "r1"
    # after every refusal the next update was applied
    assert kinds.count("session.updated") == len(bad) + 1
    for e in events:
        if e["type"] == "session.updated":
            assert e["session"]["audio"]["output"]["language"] == "de"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "A" * 1000 not in caplog.text  # user data is never logged


def test_audio_before_an_output_language_is_told_once_and_close_still_closes(
        live_server) -> None:
    async def main() -> list[dict]:
        got: list[dict] = []
        async with websockets.connect(_ws_url(live_server)) as ws:
            for event in _appends(bytes(FRAME * 5)):
                await ws.send(json.dumps(event))
            await ws.send(json.dumps({"type": "session.close"}))
            await ws.send(json.dumps({"type": "session.close", "event_id": "again"}))
            async with asyncio.timeout(LIMIT_S):
                async for raw in ws:
                    got.append(json.loads(raw))
        return got

    events = asyncio.run(main())
    kinds = [e["type"] for e in events]
    assert kinds[0] == "session.created" and kinds[-1] == "session.closed"
    codes = [e["error"]["code"] for e in events if e["type"] == "error"]
    # the second close is refused, or unanswered once session.closed has been sent
    assert codes in (["output_language_required"],
                     ["output_language_required", "session_closing"])


# -- languages change, capacity ends a session ---------------------------------------------

async def _until_closed(conn: Any, got: list[dict]) -> None:
    async with asyncio.timeout(LIMIT_S):
        async for event in conn:
            got.append(_dump(event))
            if got[-1]["type"] == "session.closed":
                return


@needs_espeak
def test_a_language_change_mid_talk_goes_on_in_the_new_language(live_server,
                                                                 tmp_path) -> None:
    first, rate = talk(tmp_path, SENTENCES[:1])
    second, _ = talk(tmp_path, SENTENCES[1:])

    def pcm(samples: np.ndarray) -> bytes:
        out = Resampler(rate, 24_000).process(samples.astype(np.float64))
        return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()

    client = AsyncOpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0)

    async def main() -> list[dict]:
        got: list[dict] = []
        async with client.realtime.translations.connect(model="livetrans") as conn:
            await conn.send({"type": "session.update", "session": {
                "audio": {"output": {"language": "de"},
                          "input": {"transcription": {"model": "whisper"}}},
                "livetrans": {"source_language": "en"}}})
            for event in _appends(pcm(first)):
                await conn.send(event)
            await conn.send({"type": "session.update", "session": {"audio": {
                "output": {"language": "ja"}}}})
            for event in _appends(pcm(second)):
                await conn.send(event)
            await conn.send({"type": "session.close"})
            await _until_closed(conn, got)
        return got

    events = asyncio.run(main())
    heard, _ = _check_talk(events)
    assert wer(" ".join(SENTENCES), heard) <= 0.3, heard
    updated = [i for i, e in enumerate(events) if e["type"] == "session.updated"]
    assert [events[i]["session"]["audio"]["output"]["language"] for i in updated] == [
        "de", "ja"]
    said = [e["delta"] for e in events if e["type"] == "session.output_transcript.delta"]
    german = [d for d in said if GERMAN & {w.strip(".,!?").lower() for w in d.split()}]
    japanese = [d for d in said if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", d)]
    assert german and japanese, said
    assert said.index(german[0]) < said.index(japanese[0])


@needs_espeak
def test_a_speaker_beyond_the_recognisers_limit_is_told_busy_and_the_first_goes_on(
        live_server, tmp_path) -> None:
    assert live_server.settings.speech.max_speakers == 1
    pcm = _pcm24(tmp_path)
    client = AsyncOpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0)
    update = {"type": "session.update", "session": {
        "audio": {"output": {"language": "de"}}, "livetrans": {"source_language": "en"}}}

    async def main() -> tuple[list[dict], list[dict], int | None]:
        first: list[dict] = []
        async with client.realtime.translations.connect(model="livetrans") as conn:
            await conn.send(update)
            for event in _appends(pcm[:len(pcm) // 2]):
                await conn.send(event)
            async with asyncio.timeout(LIMIT_S):  # the first talk is under way
                async for event in conn:
                    first.append(_dump(event))
                    if first[-1]["type"] == "session.output_transcript.delta":
                        break
            second: list[dict] = []
            async with websockets.connect(_ws_url(live_server)) as ws:
                await ws.send(json.dumps(update))
                for event in _appends(pcm[:FRAME * 20]):
                    await ws.send(json.dumps(event))
                with pytest.raises(websockets.ConnectionClosedError):
                    async with asyncio.timeout(LIMIT_S):
                        async for raw in ws:
                            second.append(json.loads(raw))
                close = ws.close_code
            for event in _appends(pcm[len(pcm) // 2:]):
                await conn.send(event)
            await conn.send({"type": "session.close"})
            await _until_closed(conn, first)
        return first, second, close

    first, second, close = asyncio.run(main())
    _check_talk(first)
    assert [e["type"] for e in second] == ["session.created", "session.updated", "error"]
    _check_error(second[-1], "busy")
    assert close == 1013


def test_a_short_talk_closed_before_detection_is_still_translated(live_server,
                                                                  tmp_path) -> None:
    audio, rate = talk(tmp_path, ["Good morning."], pause_s=0.3)  # under 3 s
    out = Resampler(rate, 24_000).process(audio.astype(np.float64))
    pcm = np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()
    client = AsyncOpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0)

    async def main() -> list[dict]:
        got: list[dict] = []
        async with client.realtime.translations.connect(model="livetrans") as conn:
            await conn.send({"type": "session.update", "session": {"audio": {
                "output": {"language": "de"},
                "input": {"transcription": {"model": "whisper"}}}}})
            for event in _appends(pcm):
                await conn.send(event)
            await conn.send({"type": "session.close"})
            await _until_closed(conn, got)
        return got

    heard, said = _check_talk(asyncio.run(main()))
    assert wer("Good morning.", heard) <= 0.5, heard
    assert said


@needs_espeak
def test_sigterm_translates_what_was_said_then_ends_the_session_with_1001(
        tmp_path) -> None:
    import os
    import signal

    from tests.server_process import serve_process

    pcm = _pcm24(tmp_path)
    with serve_process() as (proc, port):
        async def main() -> tuple[list[dict], int | None]:
            got: list[dict] = []
            url = f"ws://127.0.0.1:{port}/v1/realtime/translations?model=livetrans"
            async with websockets.connect(url) as ws:
                await ws.send(json.dumps({"type": "session.update", "session": {
                    "audio": {"output": {"language": "de"},
                              "input": {"transcription": {"model": "whisper"}}},
                    "livetrans": {"source_language": "en"}}}))
                for event in _appends(pcm):
                    await ws.send(json.dumps(event))
                async with asyncio.timeout(LIMIT_S):
                    async for raw in ws:
                        got.append(json.loads(raw))
                        if got[-1]["type"] == "session.output_transcript.delta":
                            break
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    async with asyncio.timeout(LIMIT_S):
                        async for raw in ws:
                            got.append(json.loads(raw))
                except websockets.ConnectionClosed:
                    pass
                return got, ws.close_code

        events, close = asyncio.run(main())
        heard = _text(events, "session.input_transcript.delta")
        assert wer(" ".join(SENTENCES), heard) <= 0.3, heard  # everything said, answered
        assert events[-1]["type"] == "error", events
        _check_error(events[-1], "shutting_down")
        assert close == 1001
        assert proc.wait(60) in (0, -signal.SIGTERM)


def test_a_browser_passes_its_client_secret_as_a_subprotocol(keyed_server) -> None:
    owner = OpenAI(base_url=keyed_server.url + "/v1", api_key="key-1", max_retries=0)
    secret = owner.realtime.translations.client_secrets.create(
        session={"model": "livetrans", "audio": {"output": {"language": "de"}}})

    async def main(protocols: list[str]) -> tuple[dict, str | None]:
        async with websockets.connect(_ws_url(keyed_server),
                                      subprotocols=protocols) as ws:  # type: ignore[arg-type]
            return json.loads(await asyncio.wait_for(ws.recv(), 30)), ws.subprotocol

    created, chosen = asyncio.run(main(["realtime",
                                        "openai-insecure-api-key." + secret.value]))
    assert created["type"] == "session.created" and chosen == "realtime"
    assert created["session"]["audio"]["output"]["language"] == "de"
    refused, chosen = asyncio.run(main(["realtime", "openai-insecure-api-key.ek_x.y"]))
    _check_error(refused, "invalid_client_secret")
    assert chosen == "realtime"


@needs_espeak
def test_without_a_voice_for_the_language_the_text_goes_on_and_it_is_said_once(
        tmp_path) -> None:
    pcm = _pcm24(tmp_path)
    with LiveServer(voice_engine="none") as server:
        client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        events: list[dict] = []
        with client.realtime.translations.connect(model="livetrans") as conn:
            conn.send({"type": "session.update", "session": {
                "audio": {"output": {"language": "de"}},
                "livetrans": {"source_language": "en"}}})
            for event in _appends(pcm):
                conn.send(event)
            conn.send({"type": "session.close"})
            events.append(_dump(conn.recv()))
            while events[-1]["type"] != "session.closed":
                events.append(_dump(conn.recv()))
    errors = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == ["voice_unavailable"]
    assert errors[0]["error"]["type"] == "server_error"
    assert _text(events, "session.output_transcript.delta")
    assert not [e for e in events if e["type"] == "session.output_audio.delta"]
    assert events[-1]["type"] == "session.closed"
