"""Voices on ``WebSocket /v1/live`` against the real server, model and engines (API.md
"Voices"): ``start``'s ``voices`` described in ``ready``, the committed text spoken as
binary frames (a 2-byte header naming the voice, then PCM16) before ``done``, a language
without a voice told once while its captions go on, and bad ``voices`` refused."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import websockets

from app.voice import espeak, piper
from app.voice.registry import VoiceRegistry
from tests.app.voice.audio import assert_speech

pytestmark = pytest.mark.skipif(espeak.binary() is None,
                                reason="espeak-ng is not installed (make system-deps)")

SENTENCES = ["The committee will meet again next week to discuss the new budget.",
             "Most of the members agreed that the plan needs more time."]


def _ws(server) -> str:  # noqa: ANN001
    return server.url.replace("http://", "ws://") + "/v1/live"


async def _talk(server, start: dict) -> tuple[dict, list[dict | bytes]]:  # noqa: ANN001
    """Start, say each sentence in three updates, stop; every frame until ``done``
    (JSON frames parsed, binary frames as bytes)."""
    async with websockets.connect(_ws(server), max_size=None) as ws:
        await ws.send(json.dumps({"type": "start", "display": "append", **start}))
        ready = json.loads(await ws.recv())
        frames: list[dict | bytes] = []
        for seg, sentence in enumerate(SENTENCES):
            words = sentence.split()
            for n in (4, 8):
                await ws.send(json.dumps({"type": "partial", "segment": seg,
                                          "text": " ".join(words[:n])}))
            await ws.send(json.dumps({"type": "final", "segment": seg, "text": sentence}))
        await ws.send(json.dumps({"type": "stop"}))
        async with asyncio.timeout(300):
            while True:
                raw = await ws.recv()
                frames.append(raw if isinstance(raw, bytes) else json.loads(raw))
                if isinstance(frames[-1], dict) and frames[-1]["type"] == "done":
                    return ready, frames


def test_committed_text_is_spoken_as_binary_pcm16_before_done(live_server) -> None:
    langs = ["de", "en"]
    ready, frames = asyncio.run(_talk(live_server, {"target_langs": langs, "voices": langs}))
    assert ready["type"] == "ready", ready
    voices = ready["voices"]
    assert [v["lang"] for v in voices] == langs and [v["index"] for v in voices] == [0, 1]
    for voice in voices:
        assert voice["format"] == "pcm16" and voice["channels"] == 1
        assert voice["sample_rate"] == 22050
    assert voices[0]["engine"] == "espeak-ng"
    if piper.packaged_english_voice() is not None:
        assert voices[1]["engine"] == "piper"
    assert [f for f in frames if isinstance(f, dict) and f["type"] == "error"] == []
    audio = [f for f in frames if isinstance(f, bytes)]
    assert audio and frames[-1] == {"type": "done"}
    pcm: dict[int, bytes] = {0: b"", 1: b""}
    for frame in audio:
        index, zero, body = frame[0], frame[1], frame[2:]
        assert zero == 0 and index in pcm and len(body) % 2 == 0 and body
        assert len(body) <= 2 * voices[index]["sample_rate"] // 2  # at most 0.5 s a frame
        # the PCM starts at an even offset: a browser's Int16Array(buffer, 2)
        assert np.frombuffer(frame, dtype="<i2", offset=2).size == len(body) // 2
        pcm[index] += body
    for index, voice in enumerate(voices):
        # two sentences, all of it committed by the finals: seconds of speech each
        assert_speech(pcm[index], voice["sample_rate"], 2.0, 60.0)
    # the captions went on as ever: a final caption per sentence and language
    finals = [f for f in frames if isinstance(f, dict) and f["type"] == "caption"
              and f["final"]]
    assert len(finals) == len(SENTENCES) * len(langs)


def test_a_language_without_a_voice_is_told_once_and_its_captions_go_on(
        live_server, monkeypatch: pytest.MonkeyPatch) -> None:
    # a server started with --voice-engine none and no --voice: no language has a voice
    monkeypatch.setattr(live_server.state, "voices", VoiceRegistry(engine="none"))
    ready, frames = asyncio.run(_talk(live_server, {"target_langs": ["de", "fr"],
                                                    "voices": ["fr", "de"]}))
    assert ready["type"] == "ready" and ready["voices"] == []
    errors = [f for f in frames if isinstance(f, dict) and f["type"] == "error"]
    assert sorted((e["code"], e["lang"], e["param"]) for e in errors) == [
        ("voice_unavailable", "de", "voices"), ("voice_unavailable", "fr", "voices")]
    assert not any(isinstance(f, bytes) for f in frames)
    finals = [f for f in frames if isinstance(f, dict) and f["type"] == "caption"
              and f["final"]]
    assert len(finals) == len(SENTENCES) * 2 and frames[-1] == {"type": "done"}


@pytest.mark.parametrize(("start", "expected"), [
    ({"target_lang": "de", "voices": ["fr"], "display": "append"}, "not one of the target"),
    ({"target_lang": "de", "voices": ["de", "de"], "display": "append"}, "at most once"),
    ({"target_lang": "de", "voices": ["de"]}, '"display": "append"'),
    ({"target_lang": "de", "voices": "de", "display": "append"}, "valid list"),
])
def test_bad_voices_are_refused_naming_the_field(live_server, start: dict,
                                                 expected: str) -> None:
    async def main() -> dict:
        async with websockets.connect(_ws(live_server)) as ws:
            await ws.send(json.dumps({"type": "start", **start}))
            return json.loads(await ws.recv())

    frame = asyncio.run(main())
    assert frame["type"] == "error" and frame["param"] == "voices", frame
    assert expected in frame["message"]


def test_a_speaker_slow_to_read_never_delays_the_rooms_voice() -> None:
    """The room's track gets every chunk at once while the speaker's socket takes none;
    the speaker's own copy is bounded (the oldest goes, counted)."""
    from app.live.voices import SPEAKER_QUEUE_S, ConnectionVoices, SpeakerCopy
    from app.voice.stream import VoiceChunk

    rate = 16000
    chunk = VoiceChunk("de", 0, True, bytes(rate * 2 * 5), rate, 1.0)  # 5 s each

    class StuckPublisher:
        commit_listeners: list = []
        talk = None

        async def send_bytes(self, data: bytes) -> None:
            await asyncio.Event().wait()  # a socket that never drains

    class Stream:
        aborted = False

        async def chunks(self):  # noqa: ANN202 - an async generator
            for _ in range(10):
                yield chunk

        def abort(self) -> None:
            self.aborted = True

    class Track:
        heard_s = 0.0

        def add(self, pcm: bytes, sample_rate: int) -> None:
            self.heard_s += len(pcm) / 2 / sample_rate

    async def main() -> tuple[Track, SpeakerCopy, asyncio.Task]:
        voices = ConnectionVoices(StuckPublisher(), None)  # type: ignore[arg-type]
        track = Track()
        voices.tracks[0] = track  # type: ignore[assignment]
        sending = asyncio.create_task(voices._send(0, Stream()))  # type: ignore[arg-type]
        for _ in range(50):
            await asyncio.sleep(0.01)
            if track.heard_s >= 50:
                break
        copy = voices.speaker_copies[0]
        sending.cancel()  # aborted: it ends, though its socket never drained
        await asyncio.wait_for(asyncio.wait({sending}), 5)
        return track, copy, sending

    track, copy, sending = asyncio.run(main())
    assert sending.cancelled()
    assert track.heard_s == pytest.approx(50.0)  # all ten chunks, while nothing was sent
    assert copy.queued <= int(SPEAKER_QUEUE_S * rate) * 2
    assert copy.dropped_s == pytest.approx(50.0 - SPEAKER_QUEUE_S - 0.5, abs=0.6)


def test_the_operator_turns_a_voice_off_and_on_during_the_talk(live_server) -> None:
    """Off: the language's commits are not spoken (its captions go on); on again: spoken
    from the next commit. Each switch is answered; a bad one is an error frame."""
    async def main() -> tuple[list[dict], int, int]:
        async with websockets.connect(_ws(live_server), max_size=None) as ws:
            await ws.send(json.dumps({"type": "start", "display": "append",
                                      "target_langs": ["de"], "voices": ["de"]}))
            assert json.loads(await ws.recv())["type"] == "ready"
            for bad in ({"type": "voice", "lang": "ja", "on": False},
                        {"type": "voice", "lang": "de", "on": "no"},
                        {"type": "voice", "lang": "de"}):
                await ws.send(json.dumps(bad))
            await ws.send(json.dumps({"type": "voice", "lang": "de", "on": False}))
            frames: list[dict] = []
            audio = {"off": 0, "on": 0}
            phase = "off"

            async def until(kind: str) -> None:
                nonlocal phase
                async with asyncio.timeout(300):
                    while True:
                        raw = await ws.recv()
                        if isinstance(raw, bytes):
                            audio[phase] += len(raw) - 2
                            continue
                        frames.append(json.loads(raw))
                        if frames[-1]["type"] == kind:
                            return

            await until("voice")
            await ws.send(json.dumps({"type": "final", "segment": 0, "text": SENTENCES[0]}))
            await until("caption")  # the final's caption: its commits went by unspoken
            await ws.send(json.dumps({"type": "voice", "lang": "de", "on": True}))
            await until("voice")
            phase = "on"
            await ws.send(json.dumps({"type": "final", "segment": 1, "text": SENTENCES[1]}))
            await ws.send(json.dumps({"type": "stop"}))
            await until("done")
            return frames, audio["off"], audio["on"]

    frames, off_bytes, on_bytes = asyncio.run(main())
    errors = [(f["code"], f.get("param")) for f in frames if f["type"] == "error"]
    assert errors == [("unknown_voice", "lang"), ("invalid_message", "on"),
                      ("invalid_message", "on")]
    switches = [(f["lang"], f["on"]) for f in frames if f["type"] == "voice"]
    assert switches == [("de", False), ("de", True)]
    finals = [f for f in frames if f["type"] == "caption" and f["final"]]
    assert len(finals) == 2  # the captions went on while the voice was off
    assert off_bytes == 0 and on_bytes > 22050  # silent while off; a second of speech on
