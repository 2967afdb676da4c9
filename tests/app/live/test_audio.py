"""Speech in on ``WebSocket /v1/live`` (API.md "Speech in"), against the real server: espeak-ng
speech as binary PCM frames, Whisper base in the server, captions in every language, and
the bad input a microphone client can send."""

from __future__ import annotations

import asyncio
import json
import uuid

import numpy as np
import pytest
import websockets

from tests.speech import SENTENCES, needs_espeak, talk, wer

SPEECH_PARTS = ("endpoint_silence_ms", "late_audio_ms", "audio_wait_ms", "asr_wait_ms",
                "asr_behind_partials_ms", "asr_behind_finals_ms", "asr_decode_ms",
                "handoff_ms")


def test_a_final_caption_says_where_its_time_went_before_translation() -> None:
    """``stats.speech`` from a final's ``FinalTiming``: the audio heard after the speech
    split into the endpoint's silence and what came late, then the waits and the decode
    in the order the final passed them."""
    from app.live.audio import speech_stats
    from app.speech.recognizer import FinalTiming

    timing = FinalTiming("silence", speech_end_s=2.0, heard_s=3.5, late_s=0.5, asked=10.0,
                         began=10.25, ended=10.5, behind_partials_s=0.2,
                         behind_finals_s=0.05)
    stats = speech_stats(timing, newest_audio=9.9, submitted=10.51)
    assert stats == {"ended_by": "silence", "speech_end_s": 2.0, "heard_s": 3.5,
                     "endpoint_silence_ms": 1000.0, "late_audio_ms": 500.0,
                     "audio_wait_ms": pytest.approx(100.0), "asr_wait_ms": 250.0,
                     "asr_behind_partials_ms": 200.0, "asr_behind_finals_ms": 50.0,
                     "asr_decode_ms": 250.0, "handoff_ms": pytest.approx(10.0)}
    # a recogniser that says nothing of its audio: only the thread's parts
    bare = speech_stats(FinalTiming(asked=1.0, began=1.5, ended=2.0), None, 2.0)
    assert set(bare) == {"asr_wait_ms", "asr_behind_partials_ms", "asr_behind_finals_ms",
                         "asr_decode_ms", "handoff_ms"}


def _url(server, path: str = "/v1/live") -> str:
    return server.url.replace("http://", "ws://") + path


async def _until_done(ws, frames: list[dict], limit: float = 300) -> None:
    async with asyncio.timeout(limit):
        async for raw in ws:
            frames.append(json.loads(raw))
            if frames[-1]["type"] == "done":
                return


async def _send_audio(ws, samples: np.ndarray, rate: int, frame_s: float = 0.25,
                      speed: float = 4.0) -> None:
    """PCM frames of ``frame_s``, ``speed`` times faster than real time."""
    step = int(rate * frame_s)
    for i in range(0, len(samples), step):
        await ws.send(samples[i:i + step].astype("<i2").tobytes())
        await asyncio.sleep(frame_s / speed)


@needs_espeak
def test_speech_becomes_captions_in_every_language_for_speaker_and_viewers(
        live_server, tmp_path) -> None:
    audio, rate = talk(tmp_path, SENTENCES)  # espeak's 22050 Hz: the server resamples
    room = "mic-" + uuid.uuid4().hex[:8]

    async def main() -> tuple[list[dict], list[dict]]:
        speaker: list[dict] = []
        viewer: list[dict] = []
        async with websockets.connect(_url(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "target_langs": ["de", "ja"],
                                      "input": "audio", "sample_rate": rate, "room": room}))
            ready = json.loads(await ws.recv())
            assert ready["type"] == "ready", ready
            assert ready["input"] == "audio" and ready["sample_rate"] == rate
            async with websockets.connect(
                    _url(live_server, f"/v1/live/watch?room={room}&lang=ja")) as watch:
                assert json.loads(await watch.recv())["type"] == "joined"
                await _send_audio(ws, audio, rate)
                await ws.send(json.dumps({"type": "stop"}))
                await _until_done(ws, speaker)
                async with asyncio.timeout(60):
                    async for raw in watch:
                        viewer.append(json.loads(raw))
                        if viewer[-1]["type"] == "ended":
                            break
        return speaker, viewer

    speaker, viewer = asyncio.run(main())
    assert [f for f in speaker if f["type"] == "error"] == []
    assert speaker[-1]["type"] == "done"
    captions = [f for f in speaker if f["type"] == "caption"]
    for lang in ("de", "ja"):
        finals = [c for c in captions if c["lang"] == lang and c["final"]]
        assert [c["segment"] for c in finals] == [0, 1]
        for ref, final in zip(SENTENCES, finals, strict=True):
            assert wer(ref, final["source"]) <= 0.3, final["source"]
            assert final["text"].strip()
    segments = [c["segment"] for c in captions]
    assert segments == sorted(segments)
    # every final says where the time from its speech's end went before its translation
    for final in (c for c in captions if c["final"]):
        speech = final["stats"]["speech"]
        assert speech["ended_by"] in ("silence", "stop")
        assert speech["speech_end_s"] <= speech["heard_s"]
        for part in SPEECH_PARTS:
            assert speech[part] >= 0, (part, speech)
        assert speech["asr_behind_partials_ms"] + speech["asr_behind_finals_ms"] <= \
            speech["asr_wait_ms"] + 0.1
    assert not [c for c in captions if not c["final"] and "speech" in c["stats"]]
    # a final that took the translation made at the pause before it (app.translation.pause)
    # follows that pause's partial caption, of the same words
    for final in (c for c in captions if c["final"] and c["stats"].get("pause")):
        assert final["stats"]["pause"] == "reused"
        assert [c for c in captions if not c["final"] and c["lang"] == final["lang"]
                and c["segment"] == final["segment"] and c["source"] == final["source"]
                and c["stats"].get("pause") == "translated"], final
    watched = [f for f in viewer if f["type"] == "caption" and f["final"]]
    assert [c["source"] for c in watched] == [
        c["source"] for c in captions if c["lang"] == "ja" and c["final"]]
    assert viewer[-1]["type"] == "ended"


def _exchange(server, start: dict, frames: list, limit: float = 120) -> list[dict]:
    """Send ``start`` and ``frames`` (bytes or dicts), then 'stop'; every frame the server
    sent until 'done' (or until it closed)."""

    async def main() -> list[dict]:
        got: list[dict] = []
        async with websockets.connect(_url(server), max_size=None) as ws:
            await ws.send(json.dumps(start))
            got.append(json.loads(await ws.recv()))
            for frame in frames:
                await ws.send(frame if isinstance(frame, bytes) else json.dumps(frame))
            await ws.send(json.dumps({"type": "stop"}))
            try:
                await _until_done(ws, got, limit)
            except websockets.ConnectionClosed:
                pass
        return got

    return asyncio.run(main())


def _start_answer(server, start: dict) -> dict:
    """The server's answer to ``start``."""

    async def main() -> dict:
        async with websockets.connect(_url(server)) as ws:
            await ws.send(json.dumps(start))
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    return asyncio.run(main())


AUDIO_START = {"type": "start", "target_lang": "de", "input": "audio", "sample_rate": 16000}


@pytest.mark.parametrize("rate", [7999, 96000, 0])
def test_unsupported_sample_rates_are_refused_at_start(live_server, rate) -> None:
    got = _start_answer(live_server, {**AUDIO_START, "sample_rate": rate})
    assert got["type"] == "error" and got["code"] == "unsupported_sample_rate"
    assert got["param"] == "sample_rate"


def test_a_sample_rate_needs_audio_input_and_a_string_is_no_rate(live_server) -> None:
    got = _start_answer(live_server, {"type": "start", "target_lang": "de",
                                      "sample_rate": 16000})
    assert got["code"] == "invalid_message" and got["param"] == "sample_rate"
    got = _start_answer(live_server, {**AUDIO_START, "sample_rate": "16000"})
    assert got["code"] == "unsupported_sample_rate"
    got = _start_answer(live_server, {**AUDIO_START, "input": "video"})
    assert got["code"] == "invalid_message" and got["param"] == "input"


def test_bad_frames_in_an_audio_stream_get_error_frames_and_the_talk_goes_on(
        live_server) -> None:
    frames = [b"\x00" * 3201,  # half a sample at the end
              b"\x00" * 200_000,  # larger than a frame may be
              {"type": "partial", "segment": 4, "text": "typed text"},
              {"type": "final", "segment": 5, "text": "typed text."},
              b"",  # nothing: ignored
              b"\x00" * 3200]
    got = _exchange(live_server, AUDIO_START, frames)
    assert got[0]["type"] == "ready"
    errors = [f for f in got if f["type"] == "error"]
    assert [e["code"] for e in errors] == ["invalid_audio", "too_large", "input_is_audio",
                                           "input_is_audio"]
    assert [e.get("segment") for e in errors[2:]] == [4, 5]
    assert got[-1]["type"] == "done"


def test_audio_on_a_text_connection_or_before_start_is_refused(live_server) -> None:
    async def before_start() -> dict:
        async with websockets.connect(_url(live_server)) as ws:
            await ws.send(b"\x00\x00")
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    assert asyncio.run(before_start())["code"] == "not_started"
    got = _exchange(live_server, {"type": "start", "target_lang": "de"}, [b"\x00\x00"])
    assert [f["type"] for f in got] == ["ready", "error", "done"]
    assert got[1]["code"] == "binary_not_supported"


def test_ten_minutes_of_silence_faster_than_real_time_give_nothing_and_end(
        live_server) -> None:
    """600 s of silence sent as fast as the socket takes it: the backlog is bounded (the
    reader pushes back), silence is never decoded into words, and 'stop' still ends it."""
    second = b"\x00\x00" * 16000
    got = _exchange(live_server, AUDIO_START, [second] * 600, limit=300)
    assert got[0]["type"] == "ready"
    assert [f for f in got if f["type"] in ("caption", "error")] == []
    assert got[-1]["type"] == "done"


@needs_espeak
def test_a_client_that_leaves_mid_utterance_costs_nothing_after(live_server,
                                                                 tmp_path) -> None:
    audio, rate = talk(tmp_path, SENTENCES[:1], pause_s=0.0)

    async def leave() -> None:
        async with websockets.connect(_url(live_server)) as ws:
            await ws.send(json.dumps({**AUDIO_START, "sample_rate": rate}))
            await ws.recv()
            await ws.send(audio[: len(audio) // 2].astype("<i2").tobytes())
            await asyncio.sleep(0.5)  # mid-utterance: the recogniser is at work

    asyncio.run(leave())
    got = _exchange(live_server, {**AUDIO_START, "sample_rate": rate},
                    [audio.astype("<i2").tobytes()])
    finals = [f for f in got if f["type"] == "caption" and f["final"]]
    assert len(finals) == 1 and wer(SENTENCES[0], finals[0]["source"]) <= 0.3
    assert got[-1]["type"] == "done"


@needs_espeak
def test_speech_faster_than_it_is_recognised_is_bounded_and_refused_clearly(tmp_path) -> None:
    """A small backlog (1 s) and a short backpressure wait: speech sent at once outruns
    the recogniser, the reader pushes back, then drops frames with one 'audio_overrun'
    frame; what was recognised is still captioned and 'stop' still ends the talk."""
    from tests.conftest import LiveServer

    audio, rate = talk(tmp_path, SENTENCES)
    frames = [audio[i:i + rate // 4].astype("<i2").tobytes()
              for i in range(0, len(audio), rate // 4)]
    with LiveServer(live_max_audio_backlog_s=1.0, live_backpressure_s=0.2) as server:
        got = _exchange(server, {**AUDIO_START, "sample_rate": rate}, frames)
        dropped = server.state.metrics.registry.get_sample_value(
            "livetrans_asr_dropped_audio_seconds_total")
    errors = [f for f in got if f["type"] == "error"]
    assert errors and {e["code"] for e in errors} == {"audio_overrun"}
    assert len(errors) < len(frames) // 4  # one per overrun episode, not one per frame
    assert dropped > 0
    assert got[-1]["type"] == "done"
